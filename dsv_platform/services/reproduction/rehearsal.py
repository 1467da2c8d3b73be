"""Scheduled reconstruction rehearsals and the integrity scan.

``rehearse`` is the daily dry audit of retained models and artifacts (resolve and re-hash, never rebuilds: what
an auditor would meet today); ``full_rehearsal`` is the weekly one that reproduces a rotating sample
of retained models and artifacts in full; ``integrity_scan`` re-hashes a rotating sample of readable
realizations and quarantines a mismatch. Each writes one reproduction record per manifest checked.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import CorruptError, DsvError, ResolutionError
from dsv_platform.core.lineage.lineage import NodeKind, Relation, parse_node
from dsv_platform.core.publication.records import RetentionRoot
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.publication.states import READABLE
from dsv_platform.core.reproduction.reproduction import Outcome, outcome_of_failure, reconstructable_fraction, rotating_sample
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.quarantine import quarantine_corrupt
from dsv_platform.services.publication.realization import REPO
from dsv_platform.services.reproduction.rehearsal_artifacts import resolve_artifact
from dsv_platform.services.reproduction.reproduce import ReproductionReport, reproduce, verify_dataset

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
    procedure: str = "rehearsal"

    @property
    def fraction(self) -> float:
        return reconstructable_fraction(r.outcome for r in self.reports)

    @property
    def failures(self) -> tuple[ReproductionReport, ...]:
        return tuple(r for r in self.reports if not r.reconstructable)

    def to_document(self) -> dict[str, Any]:
        return {
            "procedure": self.procedure,
            "day": self.day.isoformat(),
            "period_days": self.period_days,
            "retained_models": self.retained,
            "rehearsed": len(self.reports),
            "reconstructable": len(self.reports) - len(self.failures),
            "fraction": self.fraction,
            "rebuilt_from_raw": sum(bool(r.rebuilt) for r in self.reports),
            "results": [
                {"target": r.target, "kind": r.kind, "run_hash": r.run_hash, "ref": r.ref}
                | {"outcome": r.outcome.value, "reason": r.reason, "record_id": r.record_id, "rebuilt": list(r.rebuilt)}
                for r in self.reports
            ],
        }


def rehearse(platform: Platform, *, day: dt.date | None = None, period_days: int = 1, actor: str = "rehearsal", repo: Path = REPO) -> RehearsalRun:
    """Dry-reconstruct the retained models and artifacts due on ``day`` (all of them with ``period_days=1``).

    A model: resolve, re-hash, a training smoke test. An artifact: its manifest, code pin and inputs
    resolved and re-hashed (services/reproduction/rehearsal_artifacts.py). Nothing rebuilt: the "resolvable" series.
    """
    actor = platform.actor  # the identity that proved its key; the parameter is kept for callers, never recorded (docs/trust.md)
    day = day or dt.datetime.now(dt.UTC).date()
    population = retained_population(platform)
    reports = tuple(
        resolve_artifact(platform, r.target, actor=actor)
        if r.kind == "artifact"
        else reproduce(platform, r.target, actor=actor, rebuild=False, smoke=True, procedure="rehearsal", repo=repo)
        for r in rotating_sample(population, day.toordinal(), period_days)
    )
    return RehearsalRun(day, period_days, len(population), reports)


FULL = "full_rehearsal"
_TRAILING_HASH = re.compile(r"([0-9a-f]{64})\Z")


@dataclass(frozen=True)
class Retained:
    """One retained output a full rehearsal reproduces, by the hash ``dsv reproduce`` takes (a run or artifact manifest)."""

    kind: str  # "model" or "artifact"
    target: str
    name: str
    root_id: int


def retained_population(platform: Platform, at: dt.datetime | None = None) -> list[Retained]:
    """Every retained model run and artifact, in a stable order (the rotating sample's order)."""
    found = [Retained("model", m.run_hash, m.model_id, m.root_id) for m in retained_models(platform.registry, at)]
    found += retained_artifacts(platform, at)
    return sorted(found, key=lambda r: (r.kind, r.target))


def retained_artifacts(platform: Platform, at: dt.datetime | None = None) -> list[Retained]:
    """Artifacts an active ``artifact`` retention root keeps (its ref ends in the artifact's manifest hash)."""
    found: dict[str, Retained] = {}
    for root in platform.registry.list_retention_roots(at or dt.datetime.now(dt.UTC), kind="artifact"):
        digest = _TRAILING_HASH.search(root.ref)
        if digest is not None:
            found.setdefault(digest[1], Retained("artifact", digest[1], root.ref, root.id))
    return list(found.values())


def reproduce_in_full(platform: Platform, target: str, *, actor: str, repo: Path = REPO) -> ReproductionReport:
    """The whole audit procedure on one retained output: the recorded code and environment, rebuild, rerun, compare."""
    return reproduce(platform, target, actor=actor, rebuild=True, smoke=False, procedure=FULL, repo=repo)


def full_rehearsal(
    platform: Platform, *, day: dt.date | None = None, period_weeks: int = 1, actor: str = "rehearsal", repo: Path = REPO
) -> RehearsalRun:
    """Reproduce in full the retained outputs due in ``day``'s week (all of them with ``period_weeks=1``).

    Weekly: item i is due in the weeks where ``i % period_weeks == week % period_weeks``, so every retained
    model and artifact is reproduced once per ``period_weeks`` weeks. Its fraction is the "fully reproduced"
    series beside the daily "resolvable" one.
    """
    actor = platform.actor  # the identity that proved its key; the parameter is kept for callers, never recorded (docs/trust.md)
    day = day or dt.datetime.now(dt.UTC).date()
    population = retained_population(platform)
    due = rotating_sample(population, day.toordinal() // 7, period_weeks)
    reports = tuple(reproduce_in_full(platform, r.target, actor=actor, repo=repo) for r in due)
    return RehearsalRun(day, period_weeks * 7, len(population), reports, procedure=FULL)


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
    actor = platform.actor  # the identity that proved its key; the parameter is kept for callers, never recorded (docs/trust.md)
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
            quarantine_corrupt(platform, r.ref, r.manifest_hash, obj, str(exc), actor=actor)
            finding = IntegrityFinding(r.ref, r.manifest_hash, Outcome.CORRUPT, obj, str(exc), True)
        except ResolutionError as exc:
            finding = IntegrityFinding(r.ref, r.manifest_hash, outcome_of_failure(exc.kind), None, str(exc), False)
        details = {"procedure": "integrity_scan", "object": finding.object, "reason": finding.reason, "quarantined": finding.quarantined}
        registry.record_reproduction(r.ref, r.manifest_hash, actor=actor, outcome=finding.outcome.value, details=details)
        findings.append(finding)
    return IntegrityScan(day, period_days, len(population), tuple(findings))
