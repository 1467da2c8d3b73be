"""Iceberg metadata reads and maintenance for GC, privacy and lineage, over :class:`CanonicalTables`.

The pyiceberg objects come from ``CanonicalTables.load``; this module never
imports pyiceberg itself (that stays in iceberg.py).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_batches import BatchIndex
from dsv_platform.adapters.iceberg.iceberg_files import listed_files
from dsv_platform.adapters.iceberg.iceberg_values import RECORDED_AT
from dsv_platform.adapters.iceberg.iceberg_wap import staging_refs
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.ingest.staging import STAGING_MAX_AGE_MS
from dsv_platform.core.retention.gc import DataFileInfo, SnapshotInfo, TagInfo


def local_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    return None


def local_key(uri: str) -> str:
    """A data file's identity for comparing metadata paths with files found on disk."""
    local = local_path(uri)
    return str(local) if local is not None else uri


def _entries(tbl: Any, snap: Any, cache: dict[str, list[Any]] | None = None) -> Iterable[Any]:
    """The live entries of ``snap``'s manifests; ``cache``: by manifest path (a manifest file is never rewritten)."""
    for manifest in snap.manifests(tbl.io):
        if cache is None:
            yield from manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)
            continue
        if manifest.manifest_path not in cache:
            cache[manifest.manifest_path] = manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)
        yield from cache[manifest.manifest_path]


def max_recorded_at(tables: CanonicalTables, spec: TableSpecLike, snapshot_id: int) -> datetime | None:
    """The greatest ``_recorded_at`` among the live rows of snapshot ``snapshot_id`` (None when it has none), from metadata.

    Each live data file's manifest entry carries the column's exact upper bound (timestamps are never truncated),
    so no data file is read. A snapshot with delete files, or a data file without the bound, is answered by a scan
    of that one column instead: the same value a scan of the whole history gives.
    """
    tbl = tables.table(spec)
    snap = tbl.snapshot_by_id(snapshot_id)
    field_id = next((f.field_id for f in tbl.schema().fields if f.name == RECORDED_AT), None)
    if snap is None or field_id is None:
        return _scanned_max(tables, spec, snapshot_id)
    best: int | None = None
    for manifest in snap.manifests(tbl.io):
        for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
            data_file = entry.data_file
            bound = (data_file.upper_bounds or {}).get(field_id)
            if int(getattr(data_file.content, "value", data_file.content)) != 0 or bound is None or len(bound) != 8:
                return _scanned_max(tables, spec, snapshot_id)  # delete files or no metrics: read the column
            if data_file.record_count:
                value = struct.unpack("<q", bound)[0]
                best = value if best is None else max(best, value)
    return None if best is None else pa.scalar(best, pa.timestamp("us", tz="UTC")).as_py()  # as a scan's max gives it


def _scanned_max(tables: CanonicalTables, spec: TableSpecLike, snapshot_id: int) -> datetime | None:
    hist = tables.read(spec, snapshot_id=snapshot_id, history=True, columns=())  # the key and system columns only
    return pc.max(hist.column(RECORDED_AT)).as_py() if hist.num_rows else None


def _files_on_disk(tbl: Any) -> dict[str, tuple[int, datetime | None]]:
    """Every file under the table's ``data/`` folder, local or in an object store (S3), by :func:`local_key`: size and mtime."""
    return {key: (size, mtime) for key, size, mtime in listed_files(tbl.io, tbl.metadata.location.rstrip("/") + "/data")}


def inventory(tables: CanonicalTables) -> tuple[list[SnapshotInfo], list[TagInfo], list[DataFileInfo]]:
    """Every snapshot (with the data files it references), tag and data file (referenced or only on disk) of the namespace.

    A data file's batches come from the metadata (iceberg_batches.py); only a file it does not name them for is read.
    """
    snapshots: list[SnapshotInfo] = []
    tags: list[TagInfo] = []
    files: list[DataFileInfo] = []
    for name in tables.table_names():
        tbl = tables.load(name)
        current = tbl.current_snapshot()
        referenced: dict[str, Any] = {}
        cache: dict[str, list[Any]] = {}  # each snapshot lists its parent's manifests again: read each once
        for snap in tbl.snapshots():
            paths = []
            for entry in _entries(tbl, snap, cache):
                paths.append(entry.data_file.file_path)
                referenced.setdefault(entry.data_file.file_path, entry)
            is_current = current is not None and snap.snapshot_id == current.snapshot_id
            at = datetime.fromtimestamp(snap.timestamp_ms / 1000, UTC)
            snapshots.append(SnapshotInfo(name, snap.snapshot_id, at, is_current, tuple(sorted(set(paths))), snap.parent_snapshot_id))
        tags += [TagInfo(name, tag, ref.snapshot_id, ref.max_ref_age_ms) for tag, ref in tbl.refs().items() if str(ref.snapshot_ref_type) == "tag"]
        tags += [TagInfo(name, ref, sid, STAGING_MAX_AGE_MS if age is None else age, branch=True) for ref, sid, age in staging_refs(tbl)]  # blocked loads
        on_disk = _files_on_disk(tbl)
        index = BatchIndex(tbl)
        # Iceberg records "file:///a/b=c/f.parquet" unquoted; local files are compared by their decoded path.
        for path, entry in referenced.items():
            size = entry.data_file.file_size_in_bytes
            mtime = on_disk.pop(local_key(path), (size, None))[1]
            files.append(DataFileInfo(name, path, size, mtime, index.of_entry(entry)))
        files += [DataFileInfo(name, path, size, mtime, ()) for path, (size, mtime) in on_disk.items()]
    return snapshots, tags, files


@dataclass(frozen=True)
class SnapshotBatches:
    """One snapshot, its parent, and the raw batches its added data files carry."""

    table: str
    snapshot_id: int
    parent_id: int | None
    batches: tuple[str, ...]


def snapshot_batches(tables: CanonicalTables) -> list[SnapshotBatches]:
    """For every snapshot of every table: the batches of the data files it added, from metadata (tables without ``_batch``: none)."""
    out = []
    for name in tables.table_names():
        tbl = tables.load(name)
        index = BatchIndex(tbl)
        out += [SnapshotBatches(name, snap.snapshot_id, snap.parent_snapshot_id, index.of_snapshot(snap)) for snap in tbl.snapshots()]
    return out


def remove_tags(tables: CanonicalTables, table: str, names: list[str]) -> None:
    """Remove the named tags that are still present."""
    tbl = tables.load(table)
    present = [n for n in names if n in tbl.refs()]
    if present:
        update = tbl.manage_snapshots()
        for n in present:
            update = update.remove_tag(n)
        update.commit()


def expire_snapshots(tables: CanonicalTables, table: str, ids: list[int]) -> tuple[list[int], list[int]]:
    """Expire the snapshots no branch or tag references; returns (expired, protected)."""
    tbl = tables.load(table)
    protected = {ref.snapshot_id for ref in tbl.refs().values()}
    live = [i for i in ids if i not in protected and tbl.snapshot_by_id(i) is not None]
    if live:
        tbl.maintenance.expire_snapshots().by_ids(live).commit()
    return live, [i for i in ids if i in protected]


def live_data_files(tables: CanonicalTables, table: str) -> set[str]:
    """Keys (:func:`local_key`) of the data files some snapshot of ``table`` still references."""
    tbl = tables.load(table)
    cache: dict[str, list[Any]] = {}  # each snapshot lists its parent's manifests again: read each once
    return {local_key(e.data_file.file_path) for snap in tbl.snapshots() for e in _entries(tbl, snap, cache)}


def delete_data_file(tables: CanonicalTables, table: str, path: str) -> None:
    tables.load(table).io.delete(path)


def expire_unprotected(tables: CanonicalTables, *, older_than: datetime) -> int:
    """Expire every snapshot older than ``older_than`` that no branch or tag protects (pyiceberg's ``older_than``); returns how many went."""
    n = 0
    for name in tables.table_names():
        tbl = tables.load(name)
        before = len(tbl.snapshots())
        if any(sn.timestamp_ms < older_than.timestamp() * 1000 for sn in tbl.snapshots()):  # else no commit at all
            tbl.maintenance.expire_snapshots().older_than(older_than).commit()  # pyiceberg skips every branch and tag head
            n += before - len(tables.load(name).snapshots())
    return n


__all__ = [
    "SnapshotBatches",
    "delete_data_file",
    "expire_snapshots",
    "expire_unprotected",
    "inventory",
    "live_data_files",
    "local_key",
    "local_path",
    "remove_tags",
    "snapshot_batches",
]
