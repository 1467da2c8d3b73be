"""The model registry's part of ``dsv lineage``: the models and deployments a walk reached.

Each ``model_run`` node reached is a model version: its registry state, the model aliases at it and every
deployment that served it; each ``deployment`` node is annotated with its target, model and whether it is the
target's current deployment. The incident question (docs/lineage-and-reproduction.md, "Incident walk"): from a
bad raw batch, which datasets included it, which models trained on them, which deployments served those models.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dsv_platform.adapters.registry.models import ModelRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError
from dsv_platform.core.lineage.lineage import Node, NodeKind
from dsv_platform.core.reproduction.model_registry import parse_model_ref

_MODEL_RUN, _DEPLOYMENT = NodeKind.MODEL_RUN.value, NodeKind.DEPLOYMENT.value


def model_start(registry: Registry, query: str) -> list[Node]:
    """``NAME@ALIAS`` (a model alias) or ``NAME@sha256:<run hash>`` as its ``model_run`` node; [] for any other query."""
    try:
        ref = parse_model_ref(query)
    except DsvError:
        return []
    if ref.name is None:
        return []
    if ref.alias is not None:
        alias = ModelRecords.of(registry).get_alias(ref.name, ref.alias)
        return [] if alias is None else [(_MODEL_RUN, alias.run_hash)]
    return [(_MODEL_RUN, ref.run_hash)] if ref.run_hash and len(ref.run_hash) == 64 else []


def model_impact(registry: Registry, nodes: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(models, deployments)`` of the walk's ``nodes`` (annotating its deployment nodes in place)."""
    nodes = list(nodes)
    runs = sorted({n["id"] for n in nodes if n["kind"] == _MODEL_RUN} | {n["id"].rsplit("@", 1)[1] for n in nodes if n["kind"] == _DEPLOYMENT})
    if not runs:
        return [], []
    records = ModelRecords.of(registry)
    served = records.deployments(run_hashes=runs)
    at: dict[str, list[str]] = {}
    for a in records.aliases(run_hashes=runs):
        at.setdefault(a.run_hash, []).append(a.ref)
    models = []
    for run_hash in runs:
        version = records.get(run_hash)
        names = [n.get("name") for n in nodes if n["kind"] == _MODEL_RUN and n["id"] == run_hash]
        model = version.model if version is not None else (names[0] if names else None)
        models.append({
            "model": model, "run_hash": run_hash, "ref": f"{model}@sha256:{run_hash}", "node": f"{_MODEL_RUN}:{run_hash}",
            "state": None if version is None else version.state.value, "registered": version is not None,
            "aliases": at.get(run_hash, []), "deployments": [d.to_document() for d in served if d.run_hash == run_hash],
        })  # fmt: skip
    reached = {n["node"] for n in nodes}
    for n in nodes:
        events = [e for e in served if e.node == n["node"]] if n["kind"] == _DEPLOYMENT else []
        if events:  # newest first: the first is its newest event
            n.update({"target": events[0].target, "name": events[0].model, "current": any(e.current for e in events), "deployed_at": events[0].at.isoformat()})
    return models, [d.to_document() for d in served if d.node in reached]
