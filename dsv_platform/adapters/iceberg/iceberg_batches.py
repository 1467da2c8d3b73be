"""Which raw batches a canonical table's snapshots and data files hold, answered from Iceberg metadata.

An append names its batch in the snapshot summary (``dsv.batches``, a JSON list) and writes ``_batch`` with
whole manifest bounds, so a data file's batches come from its manifest entry: equal lower and upper bounds
name its one batch; else the summary of the snapshot that added it. A file neither answers (tables written
before, a copy-on-write rewrite holding several batches) has its ``_batch`` column read, and a file that cannot
be read then is :class:`BatchAttributionError` (GC and lineage fail closed). pyiceberg objects come from
``CanonicalTables.load``; this module does not import pyiceberg. Details: docs/storage.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError
from dsv_platform.adapters.iceberg.iceberg_values import BATCH, BATCHES_PROPERTY


class BatchAttributionError(CanonicalTableError):
    """A data file whose batches the metadata does not name could not be read to find them."""


def summary_batches(snap: Any) -> tuple[str, ...] | None:
    """The batches the snapshot summary names for the files it added (None: the summary names none)."""
    raw = None if snap.summary is None else snap.summary.get(BATCHES_PROPERTY)
    if raw is None:
        return None
    try:
        batches = json.loads(raw)
    except ValueError as exc:
        raise BatchAttributionError(f"snapshot {snap.snapshot_id}: summary property {BATCHES_PROPERTY}={raw!r} is not a JSON list") from exc
    if not isinstance(batches, list) or not all(isinstance(b, str) for b in batches):
        raise BatchAttributionError(f"snapshot {snap.snapshot_id}: summary property {BATCHES_PROPERTY}={raw!r} is not a JSON list of strings")
    return tuple(sorted(set(batches)))


def read_batches(tbl: Any, path: str) -> tuple[str, ...]:
    """The ``_batch`` values of one data file, read from the file (the fallback); unreadable: BatchAttributionError."""
    try:
        with tbl.io.new_input(path).open() as fh:
            col = pq.read_table(fh, columns=[BATCH]).column(BATCH)
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise BatchAttributionError(f"data file {path}: its batches are not in the metadata and the file cannot be read ({exc})") from exc
    return tuple(sorted(str(v) for v in pc.unique(col).to_pylist()))


class BatchIndex:
    """The batches of one table's data files and snapshots, from metadata; ``reader`` reads a file when it must."""

    def __init__(self, tbl: Any, reader: Callable[[Any, str], tuple[str, ...]] = read_batches) -> None:
        self.tbl, self.reader = tbl, reader
        self.field_id = next((f.field_id for f in tbl.schema().fields if f.name == BATCH), None)
        self.by_snapshot = {s.snapshot_id: s for s in tbl.snapshots()}
        self.files_read = 0

    def of_entry(self, entry: Any) -> tuple[str, ...]:
        """The batches of the data file of one manifest entry."""
        data_file = entry.data_file
        if self.field_id is None or not data_file.record_count:
            return ()
        lower = (data_file.lower_bounds or {}).get(self.field_id)
        if lower is not None and lower == (data_file.upper_bounds or {}).get(self.field_id):
            return (bytes(lower).decode("utf-8"),)  # lower == upper: one whole (untruncated) value
        added = self.by_snapshot.get(entry.snapshot_id)
        named = None if added is None else summary_batches(added)
        if named is not None and len(named) == 1:
            return named  # the snapshot added files of one batch only
        self.files_read += 1
        return self.reader(self.tbl, data_file.file_path)

    def of_snapshot(self, snap: Any) -> tuple[str, ...]:
        """The batches of the data files ``snap`` added: its summary's, else those of the live files of the manifests it wrote."""
        if self.field_id is None:
            return ()
        named = summary_batches(snap)
        if named is not None:
            return named
        batches: set[str] = set()
        for manifest in snap.manifests(self.tbl.io):
            if manifest.added_snapshot_id == snap.snapshot_id:
                for entry in manifest.fetch_manifest_entry(self.tbl.io, discard_deleted=True):
                    batches.update(self.of_entry(entry))
        return tuple(sorted(batches))


__all__ = ["BatchAttributionError", "BatchIndex", "read_batches", "summary_batches"]
