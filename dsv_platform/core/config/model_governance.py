"""``model_governance:`` in ``platform.yaml``: what a privacy deletion obliges for a model trained on the deleted data.

Per model family (the model name a run manifest records): ``continue_until_retrain: 30d`` (it may be served
for that long, then the obligation is overdue), ``retrain_required`` (retrain before it is served again) or
``stop_serving``. A family that declares nothing gets ``default`` (itself defaulting to ``retrain_required``:
fail closed, nothing keeps serving on silence). Pure: vocabulary, parsing and the obligation's state.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError, check_keys

GOVERNANCE_KEYS = frozenset({"default", "families"})
_DAYS = re.compile(r"^([1-9][0-9]{0,3})d\Z")
_FAMILY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


class ModelPolicy(enum.StrEnum):
    CONTINUE_UNTIL_RETRAIN = "continue_until_retrain"
    RETRAIN_REQUIRED = "retrain_required"
    STOP_SERVING = "stop_serving"


class Evidence(enum.StrEnum):
    """What closes an obligation: a retrained model of the family, or a recorded decision that the model is no longer served."""

    RETRAINED = "retrained"
    NOT_SERVED = "not_served"


CLOSED_BY: dict[ModelPolicy, Evidence] = {
    ModelPolicy.CONTINUE_UNTIL_RETRAIN: Evidence.RETRAINED,
    ModelPolicy.RETRAIN_REQUIRED: Evidence.RETRAINED,
    ModelPolicy.STOP_SERVING: Evidence.NOT_SERVED,
}


@dataclass(frozen=True)
class FamilyPolicy:
    """One family's policy; ``grace_days`` only with ``continue_until_retrain``."""

    policy: ModelPolicy = ModelPolicy.RETRAIN_REQUIRED
    grace_days: int | None = None

    def describe(self) -> str:
        return f"{self.policy.value}: {self.grace_days}d" if self.grace_days is not None else self.policy.value

    def due_at(self, opened_at: dt.datetime) -> dt.datetime | None:
        """When serving the model on stops being allowed (None: no grace period)."""
        return None if self.grace_days is None else opened_at + dt.timedelta(days=self.grace_days)


DEFAULT_POLICY = FamilyPolicy(ModelPolicy.RETRAIN_REQUIRED)
"""What a family that declares nothing gets when ``model_governance.default`` is not set (fail closed)."""


@dataclass(frozen=True)
class ModelGovernance:
    default: FamilyPolicy = DEFAULT_POLICY
    families: Mapping[str, FamilyPolicy] = field(default_factory=dict)

    def policy_for(self, family: str | None) -> tuple[FamilyPolicy, str]:
        """The family's policy and where it comes from (``families.<name>``, ``default``, or the built-in default)."""
        if family is not None and family in self.families:
            return self.families[family], f"model_governance.families.{family}"
        if self.default is DEFAULT_POLICY:
            return DEFAULT_POLICY, "built-in default (the family declares nothing)"
        return self.default, "model_governance.default"


def parse_policy(value: Any, *, file: Path, key: str) -> FamilyPolicy:
    """``retrain_required``, ``stop_serving`` or ``{continue_until_retrain: <N>d}``."""
    if isinstance(value, str) and value in (ModelPolicy.RETRAIN_REQUIRED, ModelPolicy.STOP_SERVING):
        return FamilyPolicy(ModelPolicy(value))
    if value == ModelPolicy.CONTINUE_UNTIL_RETRAIN.value:
        raise ConfigError(f"{value!r} needs its grace period, e.g. {{continue_until_retrain: 30d}}", file=file, key=key)
    if isinstance(value, Mapping) and list(value) == [ModelPolicy.CONTINUE_UNTIL_RETRAIN.value]:
        raw = value[ModelPolicy.CONTINUE_UNTIL_RETRAIN.value]
        match = _DAYS.match(raw) if isinstance(raw, str) else None
        if match is None:
            raise ConfigError(f"must be a number of days such as 30d (1d to 9999d), got {raw!r}", file=file, key=f"{key}.continue_until_retrain")
        return FamilyPolicy(ModelPolicy.CONTINUE_UNTIL_RETRAIN, int(match.group(1)))
    choices = "retrain_required, stop_serving or {continue_until_retrain: 30d}"
    raise ConfigError(f"must be {choices}, got {value!r}", file=file, key=key)


def parse_model_governance(doc: Any, *, file: Path) -> ModelGovernance:
    """The ``model_governance:`` mapping: ``default`` (optional) and ``families: {<model name>: <policy>}``."""
    doc = check_keys(doc, file=file, where="model_governance", allowed=GOVERNANCE_KEYS)
    default = parse_policy(doc["default"], file=file, key="model_governance.default") if "default" in doc else DEFAULT_POLICY
    families = doc.get("families", {})
    if not isinstance(families, Mapping):
        raise ConfigError(f"must be a mapping of model family names to policies, got {families!r}", file=file, key="model_governance.families")
    parsed: dict[str, FamilyPolicy] = {}
    for name, value in families.items():
        if not isinstance(name, str) or not _FAMILY.match(name):
            raise ConfigError(f"must be a model name (the run manifest's model), got {name!r}", file=file, key=f"model_governance.families.{name}")
        parsed[name] = parse_policy(value, file=file, key=f"model_governance.families.{name}")
    return ModelGovernance(default, parsed)


def obligation_state(*, closed: bool, due_at: dt.datetime | None, now: dt.datetime) -> str:
    """``closed``, ``overdue`` (a grace period that ended) or ``open``."""
    if closed:
        return "closed"
    return "overdue" if due_at is not None and now >= due_at else "open"


__all__ = [
    "CLOSED_BY",
    "DEFAULT_POLICY",
    "Evidence",
    "FamilyPolicy",
    "ModelGovernance",
    "ModelPolicy",
    "obligation_state",
    "parse_model_governance",
    "parse_policy",
]
