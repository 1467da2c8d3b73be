"""Values of the canonical-table adapter (iceberg.py): the table schema, append and delete outcomes, snapshots and pins.

Pure pyarrow; kept apart so iceberg.py holds only the pyiceberg calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.contract import Contract

RECORDED_AT = "_recorded_at"
BATCH = "_batch"


def table_schema(contract: Contract) -> pa.Schema:
    """The Arrow schema of a canonical table: the contract's columns, then ``_recorded_at`` and ``_batch``."""
    fields = list(contract.arrow_schema)
    fields.append(pa.field(RECORDED_AT, pa.timestamp("us", tz="UTC"), nullable=False))
    fields.append(pa.field(BATCH, pa.string(), nullable=False))
    return pa.schema(fields)


@dataclass(frozen=True)
class AppendOutcome:
    """What an append did: the snapshot it created (or the current one) and row counts."""

    table: str
    snapshot_id: int | None
    appended: int
    unchanged: int
    already_applied: bool
    attempts: int


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class PinnedSnapshot:
    """A source snapshot a realization depends on, protected by ``tag``."""

    table: str
    snapshot_id: int
    tag: str

    def to_document(self) -> dict[str, object]:
        return {"table": self.table, "snapshot_id": self.snapshot_id, "tag": self.tag}


@dataclass(frozen=True)
class RowDeletion:
    """What a row-level delete did: the snapshot before and after, rows removed, the partitions they were in."""

    table: str
    snapshot_before: int | None
    snapshot_after: int | None
    rows: int
    partitions: tuple[str, ...]

    def to_document(self) -> dict[str, object]:
        return {
            "table": self.table,
            "snapshot_before": self.snapshot_before,
            "snapshot_after": self.snapshot_after,
            "rows": self.rows,
            "partitions": list(self.partitions),
        }


def latest_per_key(rows: pa.Table, key: tuple[str, ...]) -> pa.Table:
    """The latest version of each key (greatest ``_recorded_at``, then greatest ``_batch``), sorted by key.

    The order is worked out on the key and clock columns alone (stable sorts), and the wide rows are
    gathered once: the same rows in the same order as sorting the whole table twice.
    """
    if rows.num_rows == 0:
        return rows
    narrow = rows.select([*dict.fromkeys([*key, RECORDED_AT, BATCH])])
    newest_first = pc.sort_indices(narrow, sort_keys=[(RECORDED_AT, "descending"), (BATCH, "descending")])
    ordered = narrow.select(list(key)).take(newest_first).append_column("__pos", pa.array(np.arange(len(newest_first), dtype=np.int64)))
    first = ordered.group_by(list(key), use_threads=False).aggregate([("__pos", "min")]).column("__pos_min")
    picked = pc.take(newest_first, first)
    by_key = pc.sort_indices(narrow.select(list(key)).take(picked), sort_keys=[(k, "ascending") for k in key])
    return rows.take(pc.take(picked, by_key))


__all__ = ["BATCH", "RECORDED_AT", "AppendOutcome", "PinnedSnapshot", "RowDeletion", "SnapshotInfo", "latest_per_key", "table_schema"]
