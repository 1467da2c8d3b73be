"""Garbage collection against the real backends: inventory, then a guarded apply of a pure plan (core/retention/gc.py).

:func:`collect_inventory` reads the registry, object store, Iceberg catalog and landing index;
:func:`apply_plan` (gc_apply.py) is a dry run unless asked, refuses a stale plan, and deletes
in a crash-safe order, so a reader meets a realization readable or EXPIRED, never half-deleted.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsv_platform.adapters.iceberg import iceberg_maintenance
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.objects.object_store import OBJECTS_PREFIX, ObjectStore, digest_of_key
from dsv_platform.adapters.registry.artifacts import ARTIFACT, RunRecords
from dsv_platform.adapters.registry.gc_inventory import read_inventory as read_registry_inventory
from dsv_platform.adapters.registry.quarantine import QuarantineRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, ObjectErasedError, ObjectNotFoundError
from dsv_platform.core.lineage.lineage import Edge, Relation
from dsv_platform.core.retention.gc import (
    DataFileInfo,
    GcPlan,
    GcPolicy,
    Inventory,
    RawBatchInfo,
    SnapshotInfo,
    StagingInfo,
    StoredObject,
    TagInfo,
    bulk,
    plan_gc,
)
from dsv_platform.services.retention.gc_apply import ApplyReport, GcPlanStaleError, apply_plan, check_fresh, expire_source_snapshots

DEFAULT_POLICY = GcPolicy()  # frozen: safe to share as the default

# ---------------------------------------------------------------- inventory


def _object_times(store: ObjectStore) -> dict[str, datetime]:
    """Modification time per digest where the backend tells it (local files; S3 listings)."""
    out: dict[str, datetime] = {}
    if isinstance(store, EncryptingObjectStore):  # plaintext digests: plain objects, and ciphertexts through the key store
        out = _object_times(store.inner)
        sealed = _object_times(store.sealed_store)
        for digest in store.keys.digests():
            cipher = store.keys.sealed(digest)
            if cipher is not None and cipher in sealed:
                out[digest] = sealed[cipher]
        return out
    root = getattr(store, "root", None)
    if isinstance(root, Path):
        base = root / "objects" / "sha256"
        if base.exists():
            for shard in os.listdir(base):
                with os.scandir(base / shard) as entries:
                    for e in entries:
                        try:
                            out[shard + e.name] = datetime.fromtimestamp(e.stat().st_mtime, UTC)
                        except FileNotFoundError:
                            continue
        return out
    lister = getattr(store, "_list", None)
    prefix = getattr(store, "prefix", "")
    if lister is not None:
        for item in lister(OBJECTS_PREFIX):
            listed = digest_of_key(item["Key"][len(prefix) :])
            if listed is not None and item.get("LastModified") is not None:
                out[listed] = item["LastModified"].astimezone(UTC)
    return out



class GcInventoryError(DsvError):
    """Something GC must read to know what to keep cannot be read: the plan stops (fail closed)."""

def _in_flight_digests(store: ObjectStore, attempts: Iterable[str]) -> set[str]:
    digests = set()
    for attempt in attempts:
        for part in store.list_staged(attempt):
            try:
                digests.add(hashlib.sha256(store.get_staged(attempt, part.name)).hexdigest())
            except (ObjectNotFoundError, ObjectErasedError):  # the attempt finished or was swept meanwhile: nothing left to protect
                continue  # anything else (an unreachable store, a corrupt part) stops the plan: fail closed
    return digests


def _run_manifests(store: ObjectStore, lineage: Iterable[Edge]) -> dict[str, Any]:
    """Run hash -> the run manifest document its ``trained`` edge names (``run_object``); missing or erased ones are skipped.

    Any other failure (an unreachable store, a corrupt document) stops the plan: skipping it would unprotect what it names.

    GC keeps every object a run manifest names (core/retention/gc_graph.py), so the documents are read here.
    """
    out: dict[str, Any] = {}
    for edge in lineage:
        run_object = edge.attributes.get("run_object") if edge.relation == Relation.TRAINED.value else None
        if not run_object or edge.dst_id in out:
            continue
        try:
            data = store.get(str(run_object))
        except (ObjectNotFoundError, ObjectErasedError):  # gone or erased: nothing more to keep through it
            continue
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise GcInventoryError(f"run manifest object {run_object} of model run {edge.dst_id} is not JSON ({exc}); GC cannot tell what it keeps") from exc
        if isinstance(doc, dict):
            out[edge.dst_id] = doc
    return out


def _artifacts(registry: Registry) -> dict[str, Any]:
    """Artifact manifest hash -> its manifest and files, for every complete artifact run (GC keeps what an artifact root reaches)."""
    return {r.manifest_hash: {"manifest": r.manifest, "files": dict(r.files)} for r in RunRecords(registry).complete_runs(ARTIFACT) if r.manifest_hash}


def collect_inventory(
    registry: Registry,
    store: ObjectStore,
    *,
    tables: CanonicalTables | None = None,
    landing: LandingZone | None = None,
    now: datetime | None = None,
    policy: GcPolicy = DEFAULT_POLICY,
) -> Inventory:
    """Everything the platform owns, read from the backends (see the module docstring)."""
    with bulk():
        return _collect(registry, store, tables=tables, landing=landing, now=now, policy=policy)


def _collect(
    registry: Registry, store: ObjectStore, *, tables: CanonicalTables | None, landing: LandingZone | None, now: datetime | None, policy: GcPolicy
) -> Inventory:
    now = now or datetime.now(UTC)
    horizon = now - policy.safety_window
    reg = read_registry_inventory(registry, now=now)
    times = _object_times(store)
    new, modified = tuple.__new__, times.get  # about a million objects: no per-row Python constructor
    objects = [new(StoredObject, (digest, size, modified(digest))) for digest, size in store.iter_objects()]
    staging = [StagingInfo(a.attempt_id, a.last_modified, a.total_size, a.object_count) for a in store.list_staging()]
    in_flight = _in_flight_digests(store, [a.attempt_id for a in staging if a.last_modified > horizon])
    if in_flight:
        objects = [o if o.digest not in in_flight else StoredObject(o.digest, o.size, now) for o in objects]
    snapshots: list[SnapshotInfo] = []
    tags: list[TagInfo] = []
    data_files: list[DataFileInfo] = []
    if tables is not None:
        snapshots, tags, data_files = iceberg_maintenance.inventory(tables)
    raw: list[RawBatchInfo] = []
    if landing is not None:
        held = QuarantineRecords(registry.engine).quarantined_batches()  # an operator's quarantine keeps the batch like an unreadable one
        for rec in landing.records():
            raw.append(RawBatchInfo(rec.batch_ref, rec.digest, rec.size, rec.loadable and rec.batch_ref not in held, rec.landed_at))
    return Inventory(
        observed_at=now,
        watermark=reg.watermark,
        realizations=reg.realizations,
        manifests=reg.manifests,
        objects=objects,
        staging=staging,
        snapshots=snapshots,
        tags=tags,
        data_files=data_files,
        raw_batches=raw,
        aliases=reg.aliases,
        roots=reg.roots,
        lineage=reg.lineage,
        run_manifests=_run_manifests(store, reg.lineage),
        artifacts=_artifacts(registry),
        model_pointers=reg.model_pointers,
    )


def plan(
    registry: Registry,
    store: ObjectStore,
    *,
    tables: CanonicalTables | None = None,
    landing: LandingZone | None = None,
    now: datetime | None = None,
    policy: GcPolicy = DEFAULT_POLICY,
) -> GcPlan:
    """Inventory then the pure plan."""
    return plan_gc(collect_inventory(registry, store, tables=tables, landing=landing, now=now, policy=policy), policy)


__all__ = ["ApplyReport", "GcPlanStaleError", "apply_plan", "check_fresh", "collect_inventory", "expire_source_snapshots", "plan"]
