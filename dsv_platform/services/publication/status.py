"""Observability per dataset definition: freshness, publication lag, build health, consumption.

- usable freshness: age of the newest readable realization whose quality
  report passed every gate (blocking and warning);
- publication lag: publication time minus watermark; ``lag``: from valid time, split in arrival and compute (core/publication/lag.py);
- build health: rows, bytes, retries (attempts beyond the first for the same logical key), gate failures
  (FAILED candidates), time per stage (staging -> sealed -> published, from the registry's events);
- consumption: readers and reads per version, failed reads by kind, and the health of the data reads
  (adapters/registry/read_health.py): consumers, time to first byte, throughput, missing and corrupt objects;
- approval: the usable realization's state (PUBLISHED or ELIGIBLE) and who approved it why.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.lineage import LineageQueries
from dsv_platform.adapters.registry.quarantine import QuarantineRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.slo import slo_findings
from dsv_platform.core.publication.lag import lag_split
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState, is_readable
from dsv_platform.services.publication.approval import approval_metadata
from dsv_platform.services.publication.stored_report import StoredReportError, stored_report

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


@dataclass(frozen=True)
class DefinitionStatus:
    ref: str
    usable_ref: str | None
    freshness_seconds: float | None
    publication_lag_seconds: float | None
    rows: int
    bytes: int
    attempts: int
    retries: int
    gate_failures: int
    stage_seconds: dict[str, float]
    consumption: dict[str, dict[str, Any]]
    approval: dict[str, str | None] | None = None
    """The usable realization's ``state`` (PUBLISHED, ELIGIBLE) and its approval (services/publication/approval.py)."""
    quarantined: tuple[dict[str, Any], ...] = ()
    """Its QUARANTINED realizations: ref, and the quarantine holding it (id, of what, by whom, why, state); docs/quarantine.md."""
    readable: dict[str, Any] | None = None
    """What ``dsv resolve NAME:VERSION`` gives (the newest readable publication): ref, state, the gates it failed as
    warnings, the aliases pointing at it (``NAME:VERSION@production``) and its publication lag.

    ``usable_ref`` is the newest that passed every gate, warnings included; when they differ, this says why."""
    lag: dict[str, float | None] | None = None
    """The usable realization's lag from valid time: ``event_s`` = ``arrival_s`` (upstream) + ``compute_s`` (ours)."""
    slo: tuple[dict[str, Any], ...] = ()
    """Each service level of the definition (``slo:``): objective, bound_seconds, observed_seconds, met (core/config/slo.py)."""

    def to_document(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _failed_gates(registry: Registry, store: ObjectStore, manifest_hash: str) -> list[str] | None:
    """The names of the gates the realization's quality report failed ([] all passed), or None without a report (stored_report.py)."""
    try:
        doc = stored_report(registry, store, manifest_hash)
    except StoredReportError as e:
        return [] if e.recorded_passed else ["quality_report (unreadable)"]
    return None if doc is None else [str(g.get("name")) for g in doc.get("gates", []) if not g.get("passed")]


def _gates_all_passed(registry: Registry, store: ObjectStore, manifest_hash: str) -> bool:
    return _failed_gates(registry, store, manifest_hash) == []


def _lag(registry: Registry, r: Realization) -> float | None:
    """Publication lag of ``r``: its publication time minus its manifest's watermark (the newest recorded time it read)."""
    manifest = Manifest.from_json(registry.get_manifest(r.manifest_hash or ""))
    published = r.published_at or r.state_changed_at
    return (published - dt.datetime.fromisoformat(manifest.watermark)).total_seconds() if manifest.watermark else None


def realization_lag(registry: Registry, r: Realization) -> dict[str, float | None]:
    """``{event_s, arrival_s, compute_s}`` of ``r`` from its manifest (window, partitions, watermark) and publication time."""
    return lag_split(Manifest.from_json(registry.get_manifest(r.manifest_hash or "")), r.published_at or r.state_changed_at)


HEALTH_NONE: dict[str, Any] = {"consumers": [], "reads": 0, "ttfb_p50_s": None, "ttfb_max_s": None, "bytes_per_s": None, "rows_per_s": None,
                               "bytes": 0, "rows": 0, "missing": 0, "corrupt": 0}  # fmt: skip


def _consumption(registry: Registry, every: list[Realization]) -> dict[str, dict[str, Any]]:
    """Per version: its opens (readers, reads, failed) and the health of its data reads (``consumers``: every identity)."""
    opened, health = registry.consumption_summary(), registry.read_health_summary(r.manifest_hash for r in every if r.manifest_hash)
    out = {}
    for r in every:
        digest = r.manifest_hash or ""
        if digest not in opened and digest not in health:
            continue
        o = opened.get(digest, {"readers": [], "reads": 0, "failed": {}})
        h = health.get(digest, HEALTH_NONE)
        figures = {f"data_{k}" if k in ("reads", "bytes", "rows") else k: v for k, v in h.items() if k != "consumers"}
        out[r.human_version or digest or str(r.id)] = {**o, "consumers": len(set(o["readers"]) | set(h["consumers"])), **figures}
    return out


def _readable(registry: Registry, store: ObjectStore, name: str, version: str) -> dict[str, Any] | None:
    """What ``dsv resolve NAME:VERSION`` gives: the newest published realization still readable, and the aliases at it."""
    published = (r for r in registry.versions(name) if r.version == version)
    newest = next((r for r in published if is_readable(r.state) and r.manifest_hash), None)
    if newest is None:
        return None
    digest = newest.manifest_hash or ""
    return {
        "ref": newest.ref,
        "state": newest.state.value,
        "warnings": _failed_gates(registry, store, digest) or [],
        "aliases": LineageQueries(registry.engine).aliases_targeting(digest),
        "publication_lag_seconds": _lag(registry, newest),
        "lag": realization_lag(registry, newest),
    }


def _stages(registry: Registry, r: Realization) -> dict[str, float]:
    at = {ev.to_state: ev.at for ev in registry.events(r.id)}
    out = {}
    sealed, published = at.get(RealizationState.SEALED), at.get(RealizationState.PUBLISHED) or r.published_at
    if sealed is not None:
        out["build_and_seal"] = (sealed - r.created_at).total_seconds()
        if published is not None:
            out["gates_and_publish"] = (published - sealed).total_seconds()
    return out


def definition_status(registry: Registry, store: ObjectStore, definition: DatasetDefinition, *, now: dt.datetime) -> DefinitionStatus:
    every = [r for r in registry.versions(definition.name, include_candidates=True) if r.version == definition.version]
    usable = next((r for r in every if is_readable(r.state) and r.manifest_hash and _gates_all_passed(registry, store, r.manifest_hash)), None)
    versions = _consumption(registry, every)
    readable = _readable(registry, store, definition.name, definition.version)
    if usable is None:
        failures = sum(r.state is RealizationState.FAILED for r in every)
        return DefinitionStatus(definition.ref, None, None, None, 0, 0, len(every), 0, failures, {}, versions, readable=readable)
    manifest = Manifest.from_json(registry.get_manifest(usable.manifest_hash or ""))
    published = usable.published_at or usable.state_changed_at
    same_key = [r for r in every if r.logical_key == usable.logical_key]
    return DefinitionStatus(
        ref=definition.ref,
        usable_ref=usable.ref,
        freshness_seconds=(now - published).total_seconds(),
        publication_lag_seconds=_lag(registry, usable),
        lag=realization_lag(registry, usable),
        rows=manifest.rows,
        bytes=sum(p.bytes for p in manifest.partitions),
        attempts=len(every),
        retries=len(same_key) - 1,
        gate_failures=sum(r.state is RealizationState.FAILED for r in every),
        stage_seconds=_stages(registry, usable),
        consumption=versions,
        approval=approval_metadata(registry, usable),
        readable=readable,
    )


def platform_status(platform: Platform, *, now: dt.datetime | None = None) -> list[DefinitionStatus]:
    """The status of every configured dataset definition."""
    registry = platform.registry
    store = platform.store
    when = now or dt.datetime.now(dt.UTC)
    statuses = [(d, definition_status(registry, store, d, now=when)) for d in platform.config.datasets]
    return [replace(s, quarantined=_quarantined(registry, s.ref), slo=tuple(slo_findings(d.slo, s.to_document()))) for d, s in statuses]


def _quarantined(registry: Registry, ref: str) -> tuple[dict[str, Any], ...]:
    """The QUARANTINED realizations of the definition ``ref`` with the active quarantine holding each (none: the integrity scan's)."""
    name, _, version = ref.partition(":")
    held = QuarantineRecords(registry.engine).records(active_only=True)
    out = []
    for r in registry.versions(name, include_candidates=True):
        if r.version == version and r.state is RealizationState.QUARANTINED and r.manifest_hash:
            record = next((q for q in reversed(held) if q.covers(r.manifest_hash)), None)
            keep = ("id", "ref", "created_by", "reason", "state")
            out.append({"ref": r.ref, "quarantine": None if record is None else {k: record.to_document()[k] for k in keep}})
    return tuple(out)
