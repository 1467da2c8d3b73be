"""The result of one reproduction (a realization, a model run or an artifact) and writing its reproduction record.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core import canonical_json
from dsv_platform.core.config import asset_keys
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.reproduction.model_run import model_of
from dsv_platform.core.reproduction.reproduction import Check, EnvironmentDiff, Outcome, OutputComparison, decide
from dsv_platform.core.reproduction.reproduction_steps import Step


@dataclass(frozen=True)
class Target:
    kind: str  # "realization" or "model"
    ref: str
    manifest_hash: str
    realization: Realization
    run: Mapping[str, Any] | None = None
    run_hash: str | None = None

    @property
    def asset_key(self) -> str | None:
        """The user string of the asset a reproduction is observed on (core/config/asset_keys.py)."""
        if self.kind == "model" and self.run is not None:
            return asset_keys.user_string_of(asset_keys.model, model_of(self.run))
        return asset_keys.user_string_of(asset_keys.snapshot, self.realization.dataset, self.realization.version)


@dataclass(frozen=True)
class ReproductionReport:
    """What the audit found; ``record_id`` is its row in the registry's reproduction records."""

    target: str
    kind: str
    ref: str
    manifest_hash: str
    run_hash: str | None
    outcome: Outcome
    checks: tuple[Check, ...]
    rebuilt: tuple[str, ...]
    environment: EnvironmentDiff | None
    output: OutputComparison | None
    procedure: str
    actor: str
    at: str
    asset_key: str | None
    record_id: int
    steps: tuple[Step, ...] = ()  # an artifact's seven steps (core/reproduction/reproduction_steps.py)
    extra: Mapping[str, Any] = field(default_factory=dict)  # what only an artifact's reproduction records (tolerance, tz rules, ...)

    @property
    def reconstructable(self) -> bool:
        return self.outcome.reconstructable

    @property
    def reason(self) -> str:
        """The last failed check implying the verdict (its step and detail), or the outcome."""
        standing = [s for s in self.steps if s.failure is self.outcome]
        if standing:
            return f"{self.outcome.value}: step {standing[0].number} ({standing[0].title}): {standing[0].summary}"
        failed = [c for c in self.checks if not c.passed]
        if not failed:
            return self.outcome.value
        c = next((c for c in reversed(failed) if c.failure is self.outcome), failed[0])
        return f"{c.failure.value if c.failure else 'FAILED'}: {c.step}: {canonical_json.dumps(dict(c.detail)).decode()}"

    def details(self) -> dict[str, Any]:
        return {
            "procedure": self.procedure,
            "target": self.target,
            "kind": self.kind,
            "run_hash": self.run_hash,
            "checks": [c.to_document() for c in self.checks],
            "matched": [c.step for c in self.checks if c.passed],
            "rebuilt": list(self.rebuilt),
            "environment": None if self.environment is None else self.environment.to_document(),
            "output": None if self.output is None else self.output.to_document(),
            "tolerance_needed": None if self.output is None else ("exact" if self.output.exact else dict(self.output.needed_bp)),
            **({"steps": [s.to_document() for s in self.steps]} if self.steps else {}),
            **dict(self.extra),
        }

    def to_document(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "manifest_hash": self.manifest_hash,
            "outcome": self.outcome.value,
            "actor": self.actor,
            "at": self.at,
            "record_id": self.record_id,
            "asset_key": self.asset_key,
            **self.details(),
        }


def finish(
    registry: Registry,
    target: str,
    located: Target | None,
    checks: Sequence[Check],
    rebuilt: Sequence[str],
    env: EnvironmentDiff | None,
    output: OutputComparison | None,
    procedure: str,
    actor: str,
) -> ReproductionReport:
    """Decide the verdict of a realization's or a model run's checks, write the reproduction record, return the report."""
    outcome = decide(checks, rebuilt=rebuilt)
    report = ReproductionReport(
        target=target,
        kind="unknown" if located is None else located.kind,
        ref=target if located is None else located.ref,
        manifest_hash="" if located is None else located.manifest_hash,
        run_hash=None if located is None else located.run_hash,
        outcome=outcome,
        checks=tuple(checks),
        rebuilt=tuple(rebuilt),
        environment=env,
        output=output,
        procedure=procedure,
        actor=actor,
        at=dt.datetime.now(dt.UTC).isoformat(),
        asset_key=None if located is None else located.asset_key,
        record_id=0,
    )
    return write_record(registry, report)


def write_record(registry: Registry, report: ReproductionReport) -> ReproductionReport:
    """Store ``report`` as a reproduction record; the report with its record id."""
    details = {**report.details(), "at": report.at}
    record_id = registry.record_reproduction(report.ref, report.manifest_hash, actor=report.actor, outcome=report.outcome.value, details=details)
    return replace(report, record_id=record_id)
