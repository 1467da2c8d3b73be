"""The model registry's vocabulary (pure): model references, versions, aliases and deployments.

A model version is one complete model run, named by its run manifest hash; its model name is the run
manifest's ``model``. It is PUBLISHED when registered and ELIGIBLE once approved, under the approval rules
of datasets (core/publication/approval.py). ``NAME@ALIAS`` points at one version of NAME, moved by
compare-and-swap. A deployment is an event (model version, target, actor, time); a target's newest
deployment is its current one. Details: docs/lineage-and-reproduction.md, "Model registry".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from dsv_platform.core.errors import ReferenceSyntaxError
from dsv_platform.core.lineage.lineage import Node, NodeKind
from dsv_platform.core.publication.records import check_alias_name, check_name
from dsv_platform.core.publication.states import RealizationState

MODEL_REF_FORMS = "NAME@sha256:<run hash>, NAME@ALIAS, model_run:<run hash>, or a run hash (a unique prefix of >= 12 hex)"
_HEX = re.compile(r"^[0-9a-f]{12,64}\Z")
_TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}\Z")
MIN_PREFIX = 12


@dataclass(frozen=True)
class ModelRef:
    """What a model reference names: a run hash (full or a prefix), or a model's alias; ``name`` when the text gave one."""

    text: str
    name: str | None = None
    run_hash: str | None = None
    alias: str | None = None


def _hex(text: str, whole: str) -> str:
    digest = text.strip().lower().removeprefix("sha256:")
    if not _HEX.match(digest):
        raise ReferenceSyntaxError(f"model reference {whole!r}: {text!r} is not a run hash of 12 to 64 hex digits; forms: {MODEL_REF_FORMS}")
    return digest


def parse_model_ref(text: str) -> ModelRef:
    """``NAME@sha256:<hash>``, ``NAME@ALIAS``, ``model_run:<hash>``, ``sha256:<hash>`` or a bare hash (prefix >= 12 hex)."""
    raw = text.strip()
    if raw.startswith(f"{NodeKind.MODEL_RUN.value}:"):
        return ModelRef(raw, run_hash=_hex(raw.split(":", 1)[1], raw))
    name, at, rest = raw.partition("@")
    if not at:
        return ModelRef(raw, run_hash=_hex(raw, raw))
    check_name(name)
    if rest.startswith("sha256:"):
        return ModelRef(raw, name=name, run_hash=_hex(rest, raw))
    return ModelRef(raw, name=name, alias=check_alias_name(rest))


def parse_model_alias(text: str) -> tuple[str, str]:
    """``NAME@ALIAS`` as ``(name, alias)``; anything else is a usage error."""
    ref = parse_model_ref(text)
    if ref.name is None or ref.alias is None:
        raise ReferenceSyntaxError(f"{text!r}: name the model alias as NAME@ALIAS (e.g. fraud_model@production)")
    return ref.name, ref.alias


def check_target(target: str) -> str:
    """A deployment target's name: letters, digits and ``_ . : / -``, no ``@`` (it is part of the deployment's lineage node)."""
    if not isinstance(target, str) or not _TARGET.match(target):
        raise ReferenceSyntaxError(f"deployment target {target!r} must match [A-Za-z0-9][A-Za-z0-9_.:/-]* (at most 200 characters, no '@')")
    return target


def deployment_node(target: str, run_hash: str) -> Node:
    """``deployment:<target>@<run hash>``: the model version served on ``target``."""
    return (NodeKind.DEPLOYMENT.value, f"{target}@{run_hash}")


@dataclass(frozen=True)
class ModelVersion:
    model: str
    run_hash: str
    state: RealizationState
    trained_on: str
    trained_by: str
    registered_at: datetime

    @property
    def ref(self) -> str:
        return f"{self.model}@sha256:{self.run_hash}"

    @property
    def node(self) -> str:
        return f"{NodeKind.MODEL_RUN.value}:{self.run_hash}"

    def to_document(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "run_hash": self.run_hash,
            "ref": self.ref,
            "node": self.node,
            "state": self.state.value,
            "trained_on": self.trained_on,
            "trained_by": self.trained_by,
            "registered_at": self.registered_at.isoformat(),
        }


@dataclass(frozen=True)
class ModelAlias:
    model: str
    alias: str
    run_hash: str
    generation: int
    updated_at: datetime
    updated_by: str

    @property
    def ref(self) -> str:
        return f"{self.model}@{self.alias}"

    def to_document(self) -> dict[str, Any]:
        return {
            "alias": self.ref,
            "model": self.model,
            "target": self.run_hash,
            "generation": self.generation,
            "updated_at": self.updated_at.isoformat(),
            "updated_by": self.updated_by,
        }


@dataclass(frozen=True)
class ModelAliasMove:
    model: str
    alias: str
    old_target: str | None
    new_target: str
    generation: int
    actor: str
    reason: str
    at: datetime

    def to_document(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "old_target": self.old_target,
            "new_target": self.new_target,
            "actor": self.actor,
            "reason": self.reason,
            "at": self.at.isoformat(),
        }


@dataclass(frozen=True)
class Deployment:
    """One deployment event: ``model@sha256:run_hash`` served on ``target``, recorded by ``actor`` at ``at``."""

    id: int
    target: str
    model: str
    run_hash: str
    actor: str
    at: datetime
    reason: str = ""
    current: bool = False

    @property
    def node(self) -> str:
        kind, ident = deployment_node(self.target, self.run_hash)
        return f"{kind}:{ident}"

    def to_document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "target": self.target,
            "model": self.model,
            "run_hash": self.run_hash,
            "ref": f"{self.model}@sha256:{self.run_hash}",
            "node": self.node,
            "actor": self.actor,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "current": self.current,
        }


def current_deployments(events: list[Deployment]) -> list[Deployment]:
    """Each target's newest deployment (the one it serves now), by target name; ``events`` in any order."""
    newest: dict[str, Deployment] = {}
    for d in events:
        if d.target not in newest or d.id > newest[d.target].id:
            newest[d.target] = d
    return [newest[t] for t in sorted(newest)]
