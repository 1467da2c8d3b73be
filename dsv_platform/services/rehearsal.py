"""Scheduled reconstruction rehearsals and the integrity scan.

``rehearse`` is the dry audit of retained models (never rebuilds: it reports what an
auditor would meet today); ``integrity_scan`` re-hashes a rotating sample of readable
realizations and quarantines a mismatch. Both write one reproduction record per manifest checked.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import CorruptError, DsvError, ResolutionError
from dsv_platform.core.lineage import NodeKind, Relation, parse_node
from dsv_platform.core.records import RetentionRoot
from dsv_platform.core.refs import parse_ref
from dsv_platform.core.reproduction import Outcome, outcome_of_failure, reconstructable_fraction, rotating_sample
from dsv_platform.core.states import READABLE, RealizationState
from dsv_platform.services.datasets import open_dataset
from dsv_platform.services.realization import REPO
from dsv_platform.services.reproduce import ReproductionReport, reproduce, verify_dataset

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


@dataclass(frozen=True)
class RetainedModel:
    model_id: str
    run_hash: str
    ref: str
    root_id: int


def retained_models(registry: Registry, at: dt.datetime | None = None) -> list[RetainedModel]:
    """Models an active ``model_version`` root keeps (``model_run:<hash>``, or the legacy root on the realization), by run hash."""
    runs: dict[str, RetentionRoot] = {}
    trained_on: dict[str, RetentionRoot] = {}
    for root in registry.list_retention_roots(at or dt.datetime.now(dt.UTC), kind="model_version"):
        node = parse_node(root.ref)
        if node is not None:
            if node[0] == NodeKind.MODEL_RUN.value:
                runs.setdefault(node[1], root)
            elif node[0] == NodeKind.REALIZATION.value:
                trained_on.setdefault(node[1], root)
            continue
        try:
            mh = parse_ref(root.ref).manifest_hash
        except DsvError:  # a free-form ref names no realization
            continue
        if mh is not None:
            trained_on[mh] = root
    found: dict[str, RetainedModel] = {}
    for e in registry.lineage_edges():
        if e.relation == Relation.TRAINED.value and e.dst_kind == NodeKind.MODEL_RUN.value:
            root = runs.get(e.dst_id) or trained_on.get(e.src_id)
            if root is not None:
                found.setdefault(e.dst_id, RetainedModel(f"model_run:{e.dst_id}", e.dst_id, str(e.attributes.get("ref") or root.ref), root.id))
    return [found[k] for k in sorted(found)]


@dataclass(frozen=True)
class RehearsalRun:
    day: dt.date
    period_days: int
    retained: int
    reports: tuple[ReproductionReport, ...]

    @property
    def fraction(self) -> float:
        return reconstructable_fraction(r.outcome for r in self.reports)

    @property
    def failures(self) -> tuple[ReproductionReport, ...]:
        return tuple(r for r in self.reports if not r.reconstructable)

    def to_document(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "period_days": self.period_days,
            "retained_models": self.retained,
            "rehearsed": len(self.reports),
            "reconstructable": len(self.reports) - len(self.failures),
            "fraction": self.fraction,
            "results": [{"run_hash": r.run_hash, "ref": r.ref, "outcome": r.outcome.value, "reason": r.reason, "record_id": r.record_id} for r in self.reports],
        }


def rehearse(platform: Platform, *, day: dt.date | None = None, period_days: int = 1, actor: str = "rehearsal", repo: Path = REPO) -> RehearsalRun:
    """Dry-reconstruct the retained models due on ``day`` (all of them with ``period_days=1``)."""
    day = day or dt.datetime.now(dt.UTC).date()
    models = retained_models(platform.registry)
    due = rotating_sample(models, day.toordinal(), period_days)
    reports = tuple(reproduce(platform, m.run_hash, actor=actor, rebuild=False, smoke=True, procedure="rehearsal", repo=repo) for m in due)
    return RehearsalRun(day, period_days, len(models), reports)


@dataclass(frozen=True)
class IntegrityFinding:
    ref: str
    manifest_hash: str
    outcome: Outcome
    object: str | None
    reason: str
    quarantined: bool


@dataclass(frozen=True)
class IntegrityScan:
    day: dt.date
    period_days: int
    population: int
    findings: tuple[IntegrityFinding, ...]

    @property
    def mismatches(self) -> tuple[IntegrityFinding, ...]:
        return tuple(f for f in self.findings if f.outcome is not Outcome.REPRODUCED)

    def to_document(self) -> dict[str, Any]:
        return {
            "day": self.day.isoformat(),
            "period_days": self.period_days,
            "population": self.population,
            "scanned": len(self.findings),
            "mismatches": [f.__dict__ | {"outcome": f.outcome.value} for f in self.mismatches],
        }


def integrity_scan(platform: Platform, *, day: dt.date | None = None, period_days: int = 7, actor: str = "integrity_scan") -> IntegrityScan:
    """Re-hash the readable realizations due on ``day``; quarantine and name the object on a mismatch."""
    day = day or dt.datetime.now(dt.UTC).date()
    registry = platform.registry
    population = registry.realizations_in(READABLE)
    findings = []
    for r in rotating_sample(population, day.toordinal(), period_days):
        assert r.manifest_hash is not None
        finding = IntegrityFinding(r.ref, r.manifest_hash, Outcome.REPRODUCED, None, "every object and the content hash verified", False)
        try:
            verify_dataset(open_dataset(platform, r.ref, actor=actor))
        except CorruptError as exc:
            obj = str(exc.detail.get("object") or exc.detail.get("partition") or "content hash")
            registry.transition(r.id, RealizationState.QUARANTINED, reason=f"integrity: object {obj}", actor=actor)
            finding = IntegrityFinding(r.ref, r.manifest_hash, Outcome.CORRUPT, obj, str(exc), True)
        except ResolutionError as exc:
            finding = IntegrityFinding(r.ref, r.manifest_hash, outcome_of_failure(exc.kind), None, str(exc), False)
        details = {"procedure": "integrity_scan", "object": finding.object, "reason": finding.reason, "quarantined": finding.quarantined}
        registry.record_reproduction(r.ref, r.manifest_hash, actor=actor, outcome=finding.outcome.value, details=details)
        findings.append(finding)
    return IntegrityScan(day, period_days, len(population), tuple(findings))
