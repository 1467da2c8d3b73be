"""Garbage collection against the real backends: inventory, then a guarded apply of a pure plan (core/gc.py).

:func:`collect_inventory` reads the registry (realizations, manifests, aliases,
retention roots, lineage and the state watermark, in one read transaction),
the object store (objects with modification times, staging attempts; the
bytes staged by attempts inside the safety window are hashed so that an
object a build in flight is about to reference is never collected), the
Iceberg catalog (snapshots, tags, the data files each snapshot references,
the files present under each table's ``data/`` folder, and the ``_batch``
values each live data file holds) and the raw landing index.

:func:`apply_plan` is a dry run unless ``dry_run=False``. Failure semantics:

* the plan is refused (:class:`StalePlanError`) unless the registry's state
  watermark still equals the one the plan was computed from; the watermark is
  read again before every batch of deletions, and apply stops as soon as the
  registry moves on (a concurrent publish could need what the plan collects);
* ordering is crash-safe: (1) every collectable realization is marked EXPIRED
  in the registry first (STAGING/SEALED go through ABANDONED), so resolution
  answers EXPIRED before any byte goes; (2) Iceberg tags no kept realization
  pins are removed, then unreferenced snapshots expired, then data files no
  live snapshot references (re-checked against the table after expiry) are
  deleted; (3) objects and abandoned staging attempts are deleted;
* only collectable decisions are acted on, and only their own node: objects
  that kept realizations share are kept by the plan, so a reader never sees a
  half-deleted kept realization; a process killed at any point leaves
  realizations either readable with all their objects or EXPIRED; a rerun
  (a fresh plan, then apply) finishes the remaining deletions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from sqlalchemy import select

from dsv_platform.adapters.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.object_store import OBJECTS_PREFIX, ObjectStore, digest_of_key
from dsv_platform.adapters.registry import lineage as reg_lineage
from dsv_platform.adapters.registry import retention as reg_retention
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, IllegalTransitionError
from dsv_platform.core.gc import (
    Action,
    AliasInfo,
    DataFileInfo,
    GcPlan,
    GcPolicy,
    Inventory,
    RawBatchInfo,
    RealizationInfo,
    RootSpec,
    SnapshotInfo,
    StagingInfo,
    StoredObject,
    TagInfo,
    bulk,
    plan_gc,
)
from dsv_platform.core.states import RealizationState

S = RealizationState
Step = Callable[[str, str], None]
DELETE_BATCH = 200


class StalePlanError(DsvError):
    """The registry changed since the plan was computed (or during apply); plan again."""


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
            digest = digest_of_key(item["Key"][len(prefix) :])
            if digest is not None and item.get("LastModified") is not None:
                out[digest] = item["LastModified"].astimezone(UTC)
    return out


def _in_flight_digests(store: ObjectStore, attempts: Iterable[str]) -> set[str]:
    digests = set()
    for attempt in attempts:
        for part in store.list_staged(attempt):
            try:
                digests.add(hashlib.sha256(store.get_staged(attempt, part.name)).hexdigest())
            except DsvError:
                continue
    return digests


def _local_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    return None


def _local_key(uri: str) -> str:
    """A data file's identity for comparing metadata paths with files found on disk."""
    local = _local_path(uri)
    return str(local) if local is not None else uri


def _iceberg_inventory(tables: Any, horizon: datetime) -> tuple[list[SnapshotInfo], list[TagInfo], list[DataFileInfo]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyiceberg.exceptions import NoSuchNamespaceError

    catalog, namespace = tables.catalog, tables.namespace
    snapshots: list[SnapshotInfo] = []
    tags: list[TagInfo] = []
    files: list[DataFileInfo] = []
    try:
        identifiers = catalog.list_tables(namespace)
    except NoSuchNamespaceError:  # nothing canonical yet: nothing to inventory
        return snapshots, tags, files
    for ident in identifiers:
        tbl = catalog.load_table(ident)
        name = ident[-1] if isinstance(ident, tuple) else str(ident).split(".")[-1]
        current = tbl.current_snapshot()
        referenced: dict[str, int] = {}
        for snap in tbl.snapshots():
            paths = []
            for manifest in snap.manifests(tbl.io):
                for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                    paths.append(entry.data_file.file_path)
                    referenced[entry.data_file.file_path] = entry.data_file.file_size_in_bytes
            snapshots.append(
                SnapshotInfo(name, snap.snapshot_id, datetime.fromtimestamp(snap.timestamp_ms / 1000, UTC), current is not None and snap.snapshot_id == current.snapshot_id, tuple(sorted(set(paths))))
            )
        for tag_name, ref in tbl.refs().items():
            if str(ref.snapshot_ref_type) == "tag":
                tags.append(TagInfo(name, tag_name, ref.snapshot_id))
        on_disk: dict[str, tuple[int, datetime | None]] = {}
        data_dir = _local_path(tbl.metadata.location.rstrip("/") + "/data")
        if data_dir is not None and data_dir.exists():
            for dirpath, _, names in os.walk(data_dir):
                for fname in names:
                    full = Path(dirpath) / fname
                    st = full.stat()
                    on_disk[str(full)] = (st.st_size, datetime.fromtimestamp(st.st_mtime, UTC))
        # Iceberg records "file:///a/b=c/f.parquet" unquoted; local files are compared by their decoded path.
        for path, size in referenced.items():
            batches: tuple[str, ...] = ()
            try:
                with tbl.io.new_input(path).open() as fh:
                    col = pq.read_table(fh, columns=["_batch"]).column("_batch")
                    batches = tuple(sorted(str(v) for v in pc.unique(col).to_pylist()))
            except (KeyError, OSError, pa.ArrowInvalid):  # a table without _batch, or a file gone: no raw lineage
                batches = ()
            mtime = on_disk.pop(_local_key(path), (size, None))[1]
            files.append(DataFileInfo(name, path, size, mtime, batches))
        for path, (size, mtime) in on_disk.items():
            files.append(DataFileInfo(name, path, size, mtime, ()))
    return snapshots, tags, files


def collect_inventory(
    registry: Registry,
    store: ObjectStore,
    *,
    tables: Any = None,
    landing: Any = None,
    now: datetime | None = None,
    policy: GcPolicy = GcPolicy(),
) -> Inventory:
    """Everything the platform owns, read from the backends (see the module docstring)."""
    with bulk():
        return _collect(registry, store, tables=tables, landing=landing, now=now, policy=policy)


def _collect(registry: Registry, store: ObjectStore, *, tables: Any, landing: Any, now: datetime | None, policy: GcPolicy) -> Inventory:
    now = now or datetime.now(UTC)
    horizon = now - policy.safety_window
    with registry.engine.connect() as conn, conn.begin():
        watermark = reg_retention.state_watermark(conn)
        r = s.realizations
        realizations = [
            RealizationInfo(m.id, m.dataset, m.version, m.state, m.manifest_hash, m.logical_key, m.created_at, m.published_at)
            for m in conn.execute(
                select(r.c.id, r.c.dataset, r.c.version, r.c.state, r.c.manifest_hash, r.c.logical_key, r.c.created_at, s.publication_claims.c.claimed_at.label("published_at")).outerjoin(
                    s.publication_claims, s.publication_claims.c.realization_id == r.c.id
                )
            )
        ]
        manifests = {row[0]: json.loads(row[1]) for row in conn.execute(select(s.manifests.c.manifest_hash, s.manifests.c.canonical_json))}
        aliases = [AliasInfo(m.dataset, m.version, m.alias, m.target_manifest_hash) for m in conn.execute(select(s.aliases))]
        roots = [
            RootSpec(str(rt.id), rt.kind, rt.ref, rt.reason, rt.owner, rt.expires_at)
            for rt in reg_retention.list_roots(conn, active_at=now)
        ]
        edges = reg_lineage.load_edges(conn, beyond_manifests=True)
    times = _object_times(store)
    objects = [StoredObject(o.digest, o.size, times.get(o.digest)) for o in store.iter_objects()]
    staging = [StagingInfo(a.attempt_id, a.last_modified, a.total_size, a.object_count) for a in store.list_staging()]
    in_flight = _in_flight_digests(store, [a.attempt_id for a in staging if a.last_modified > horizon])
    if in_flight:
        objects = [o if o.digest not in in_flight else StoredObject(o.digest, o.size, now) for o in objects]
    snapshots: list[SnapshotInfo] = []
    tags: list[TagInfo] = []
    data_files: list[DataFileInfo] = []
    if tables is not None:
        snapshots, tags, data_files = _iceberg_inventory(tables, horizon)
    raw: list[RawBatchInfo] = []
    if landing is not None:
        for rec in landing.records():
            raw.append(RawBatchInfo(rec.batch_ref, rec.digest, rec.size, rec.loadable, rec.landed_at))
    return Inventory(
        observed_at=now,
        watermark=watermark,
        realizations=realizations,
        manifests=manifests,
        objects=objects,
        staging=staging,
        snapshots=snapshots,
        tags=tags,
        data_files=data_files,
        raw_batches=raw,
        aliases=aliases,
        roots=roots,
        lineage=edges,
    )


def plan(registry: Registry, store: ObjectStore, *, tables: Any = None, landing: Any = None, now: datetime | None = None, policy: GcPolicy = GcPolicy()) -> GcPlan:
    """Inventory then the pure plan."""
    return plan_gc(collect_inventory(registry, store, tables=tables, landing=landing, now=now, policy=policy), policy)


# ---------------------------------------------------------------- apply


@dataclass
class ApplyReport:
    dry_run: bool
    expired: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    snapshots_expired: list[str] = field(default_factory=list)
    data_files_deleted: list[str] = field(default_factory=list)
    objects_deleted: list[str] = field(default_factory=list)
    staging_abandoned: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_freed: int = 0

    def to_document(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "expired": self.expired,
            "tags_removed": self.tags_removed,
            "snapshots_expired": self.snapshots_expired,
            "data_files_deleted": self.data_files_deleted,
            "objects_deleted": self.objects_deleted,
            "staging_abandoned": self.staging_abandoned,
            "skipped": self.skipped,
            "bytes_freed": self.bytes_freed,
        }

    def summary(self) -> str:
        verb = "would" if self.dry_run else "did"
        return (
            f"{verb} expire {len(self.expired)} realization(s), remove {len(self.tags_removed)} tag(s), expire {len(self.snapshots_expired)} snapshot(s), "
            f"delete {len(self.data_files_deleted)} data file(s) and {len(self.objects_deleted)} object(s), abandon {len(self.staging_abandoned)} staging attempt(s); "
            f"{self.bytes_freed} bytes; skipped {len(self.skipped)}"
        )


_REALIZATION_ID = re.compile(r"realization (\d+)")


def check_fresh(registry: Registry, plan: GcPlan) -> None:
    current = registry.state_watermark()
    if _norm(current) != _norm(plan.watermark):
        raise StalePlanError(
            f"the GC plan of {plan.created_at.isoformat()} is stale: the registry changed since (watermark {json.dumps(plan.watermark, sort_keys=True)} "
            f"-> {json.dumps(current, sort_keys=True)}); run `dsv gc plan` again"
        )


def _norm(watermark: Mapping[str, Any]) -> str:
    return json.dumps(watermark, sort_keys=True, default=str)


def apply_plan(
    plan: GcPlan,
    *,
    registry: Registry,
    store: ObjectStore,
    tables: Any = None,
    dry_run: bool = True,
    actor: str = "dsv-gc",
    on_step: Step | None = None,
) -> ApplyReport:
    """Apply ``plan`` (dry run by default); see the module docstring for the refusal and crash semantics."""
    step = on_step or (lambda name, detail: None)
    check_fresh(registry, plan)
    report = ApplyReport(dry_run=dry_run)
    todo = {a.value: plan.collectable(a.value) for a in Action}
    if dry_run:
        report.expired = [d.id for d in todo[Action.EXPIRE_REALIZATION.value]]
        report.tags_removed = [d.id for d in todo[Action.REMOVE_TAG.value]]
        report.snapshots_expired = [d.id for d in todo[Action.EXPIRE_SNAPSHOT.value]]
        report.data_files_deleted = [d.id for d in todo[Action.DELETE_DATA_FILE.value]]
        report.objects_deleted = [d.id for d in todo[Action.DELETE_OBJECT.value]]
        report.staging_abandoned = [d.id for d in todo[Action.ABANDON_STAGING.value]]
        report.bytes_freed = sum(d.bytes for ds in todo.values() for d in ds if d.action != Action.EXPIRE_REALIZATION.value)
        return report

    # (1) registry first: resolution answers EXPIRED before any byte goes
    reason = f"garbage collected: no retention root reaches it (GC plan of {plan.created_at.isoformat()})"
    for d in todo[Action.EXPIRE_REALIZATION.value]:
        match = _REALIZATION_ID.search(d.detail)
        if match is None:
            report.skipped.append(f"{d.id}: no realization id in the plan")
            continue
        rid = int(match.group(1))
        try:
            current = registry.get(rid)
            if current.state in (S.STAGING, S.SEALED):
                current = registry.transition(rid, S.ABANDONED, reason=reason, actor=actor)
            if current.state is not S.EXPIRED:
                registry.transition(rid, S.EXPIRED, reason=reason, actor=actor)
        except IllegalTransitionError as exc:
            report.skipped.append(f"realization {rid}: {exc}")
            continue
        report.expired.append(d.id)
        step("expired", d.id)
    watermark = _norm(registry.state_watermark())

    def still_fresh() -> None:
        if _norm(registry.state_watermark()) != watermark:
            raise StalePlanError("the registry changed during GC apply; stopped before deleting more; run `dsv gc plan` again")

    # (2) Iceberg: tags, then snapshots, then data files no live snapshot references
    if tables is not None:
        _apply_iceberg(tables, todo, report, step, still_fresh)
    # (3) objects and staging
    for i, d in enumerate(todo[Action.DELETE_OBJECT.value]):
        if i % DELETE_BATCH == 0:
            still_fresh()
        if store.delete(d.id):
            report.bytes_freed += d.bytes
        report.objects_deleted.append(d.id)
        step("object_deleted", d.id)
    for d in todo[Action.ABANDON_STAGING.value]:
        store.abandon(d.id)
        report.staging_abandoned.append(d.id)
        report.bytes_freed += d.bytes
        step("staging_abandoned", d.id)
    step("done", "")
    return report


def _apply_iceberg(tables: Any, todo: Mapping[str, list[Any]], report: ApplyReport, step: Step, still_fresh: Callable[[], None]) -> None:
    catalog, namespace = tables.catalog, tables.namespace

    def load(table: str) -> Any:
        return catalog.load_table(f"{namespace}.{table}")

    by_table: dict[str, list[str]] = {}
    for d in todo[Action.REMOVE_TAG.value]:
        table, _, tag = d.id.partition("#")
        by_table.setdefault(table, []).append(tag)
    for table, names in sorted(by_table.items()):
        still_fresh()
        tbl = load(table)
        refs = tbl.refs()
        present = [n for n in names if n in refs]
        if present:
            update = tbl.manage_snapshots()
            for n in present:
                update = update.remove_tag(n)
            update.commit()
        for n in names:
            report.tags_removed.append(f"{table}#{n}")
            step("tag_removed", f"{table}#{n}")
    snaps: dict[str, list[int]] = {}
    for d in todo[Action.EXPIRE_SNAPSHOT.value]:
        table, _, sid = d.id.partition("@")
        snaps.setdefault(table, []).append(int(sid))
    for table, ids in sorted(snaps.items()):
        still_fresh()
        tbl = load(table)
        protected = {ref.snapshot_id for ref in tbl.refs().values()}
        live = [i for i in ids if i not in protected and tbl.snapshot_by_id(i) is not None]
        for i in ids:
            if i in protected:
                report.skipped.append(f"snapshot {table}@{i}: still referenced by a branch or tag")
        if live:
            tbl.maintenance.expire_snapshots().by_ids(live).commit()
        for i in live:
            report.snapshots_expired.append(f"{table}@{i}")
            step("snapshot_expired", f"{table}@{i}")
    files: dict[str, list[Any]] = {}
    for d in todo[Action.DELETE_DATA_FILE.value]:
        files.setdefault(d.detail, []).append(d)
    for table, decisions in sorted(files.items()):
        still_fresh()
        tbl = load(table)
        live_files = set()
        for snap in tbl.snapshots():
            for manifest in snap.manifests(tbl.io):
                for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                    live_files.add(entry.data_file.file_path)
        live_files = {_local_key(f) for f in live_files}
        for d in decisions:
            if _local_key(d.id) in live_files:
                report.skipped.append(f"data file {d.id}: a live snapshot references it")
                continue
            tbl.io.delete(d.id)
            report.data_files_deleted.append(d.id)
            report.bytes_freed += d.bytes
            step("data_file_deleted", d.id)


def expire_source_snapshots(tables: Any, *, older_than: datetime | None = None) -> int:
    """Iceberg's own retention (what a table owner may configure): expire every unprotected snapshot older than ``older_than``.

    Tagged snapshots are protected by Iceberg itself; this is how "source
    snapshot expiry set to zero" is simulated. Returns how many went.
    """
    older_than = older_than or datetime.now(UTC) + timedelta(seconds=1)
    n = 0
    for ident in tables.catalog.list_tables(tables.namespace):
        tbl = tables.catalog.load_table(ident)
        protected = {ref.snapshot_id for ref in tbl.refs().values()}
        ids = [sn.snapshot_id for sn in tbl.snapshots() if sn.snapshot_id not in protected and sn.timestamp_ms < older_than.timestamp() * 1000]
        if ids:
            tbl.maintenance.expire_snapshots().by_ids(ids).commit()
            n += len(ids)
    return n


__all__ = ["ApplyReport", "StalePlanError", "apply_plan", "check_fresh", "collect_inventory", "expire_source_snapshots", "plan"]
