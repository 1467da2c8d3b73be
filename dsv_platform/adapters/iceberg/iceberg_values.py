"""Values of the canonical-table adapter (iceberg.py): the table schema, append and delete outcomes, snapshots and pins.

Pure pyarrow; kept apart so iceberg.py holds only the pyiceberg calls.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.contract import Contract

RECORDED_AT = "_recorded_at"
BATCH = "_batch"
# The snapshot summary property naming the batches whose rows the data files a snapshot adds hold: a JSON list of
# batch refs (sorted, no duplicates); an append writes one batch, so its list has one element. docs/storage.md.
BATCHES_PROPERTY = "dsv.batches"
# The table property that keeps ``_batch``'s manifest bounds whole (not truncated to 16 characters): a data file whose
# lower and upper bound are equal names its one batch even after the snapshot that added it expired.
BATCH_METRICS = {f"write.metadata.metrics.column.{BATCH}": "full"}


def batch_properties(batch: str) -> dict[str, str]:
    """The snapshot summary properties of an append of ``batch``."""
    return {BATCHES_PROPERTY: json.dumps([batch])}


def table_schema(contract: Contract) -> pa.Schema:
    """The Arrow schema of a canonical table: the contract's columns, then ``_recorded_at`` and ``_batch``."""
    fields = list(contract.arrow_schema)
    fields.append(pa.field(RECORDED_AT, pa.timestamp("us", tz="UTC"), nullable=False))
    fields.append(pa.field(BATCH, pa.string(), nullable=False))
    return pa.schema(fields)


def stamped(rows: pa.Table, recorded_at: object, batch: str) -> pa.Table:
    """Contract rows with the system columns: every row learned at ``recorded_at`` from ``batch``."""
    ts = pa.timestamp("us", tz="UTC")
    rows = rows.append_column(pa.field(RECORDED_AT, ts, nullable=False), pa.array([recorded_at] * rows.num_rows, ts))
    return rows.append_column(pa.field(BATCH, pa.string(), nullable=False), pa.array([batch] * rows.num_rows, pa.string()))


def day_of(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A partition column as days: a date as it is, a timestamp's UTC day."""
    if pa.types.is_timestamp(column.type):
        return pc.cast(pc.cast(column, pa.timestamp(column.type.unit)), pa.date32())
    return column


@dataclass(frozen=True)
class AppendState:
    """What an append compares a batch's rows with, from the rows of the partitions it touches.

    ``applied``: the days holding the batch ({None} when not by day); ``latest``: the version per key (and day)
    in effect at the batch's position (``_recorded_at``, then ``_batch``, as :func:`latest_per_key` ranks them);
    ``later``: per day, the batches recorded after that position, with their recorded times.
    """

    applied: set[object]
    latest: pa.Table
    later: dict[object, dict[str, dt.datetime]]
    current: pa.Table


def at_or_before(rows: pa.Table, recorded_at: dt.datetime, batch: str) -> pa.ChunkedArray:
    """Per row: recorded at or before the position (``recorded_at``, ``batch``)."""
    when = pa.scalar(recorded_at, pa.timestamp("us", tz="UTC"))
    same = pc.and_(pc.equal(rows.column(RECORDED_AT), when), pc.less_equal(rows.column(BATCH), batch))
    return pc.or_(pc.less(rows.column(RECORDED_AT), when), same)


def append_state(current: pa.Table, contract: Contract, batch: str, recorded_at: dt.datetime, *, by_day: bool) -> AppendState:
    """The :class:`AppendState` of ``batch`` recorded at ``recorded_at`` over ``current`` (the touched partitions' rows)."""
    if not current.num_rows:
        return AppendState(set(), current, {}, current)
    part, mine = contract.partition_by, pc.equal(current.column(BATCH), batch)
    before = at_or_before(current, recorded_at, batch)
    in_order = bool(pc.all(before).as_py())  # landed in recorded order: every stored row is at or before the batch, as before issue 25
    later: dict[object, dict[str, dt.datetime]] = {}
    if part is None or not by_day:
        for group in () if in_order else current.filter(pc.invert(before)).group_by([BATCH]).aggregate([(RECORDED_AT, "max")]).to_pylist():
            later.setdefault(None, {})[group[BATCH]] = group[f"{RECORDED_AT}_max"]
        known = current if in_order else current.filter(before)
        return AppendState({None} if pc.any(mine).as_py() else set(), latest_per_key(known, contract.key), later, current)
    days = day_of(current.column(part))
    if not in_order:
        after = current.select([BATCH, RECORDED_AT]).append_column("__day", days).filter(pc.invert(before))
        for group in after.group_by(["__day", BATCH]).aggregate([(RECORDED_AT, "max")]).to_pylist():
            later.setdefault(group["__day"], {})[group[BATCH]] = group[f"{RECORDED_AT}_max"]
    applied = set(pc.unique(days.filter(mine)).to_pylist())
    keyed = current.append_column("__day", days)
    keyed = keyed if in_order else keyed.filter(before)
    return AppendState(applied, latest_per_key(keyed, (*contract.key, "__day")).drop_columns(["__day"]), later, current)


def unwritten_rows(rows: pa.Table, state: AppendState, contract: Contract, batch: str, day: object) -> pa.Table:
    """Rows of ``batch`` (of ``day``) whose key the batch has not written in that day yet (it skipped them as unchanged)."""
    own = state.current.filter(pc.equal(state.current.column(BATCH), batch))
    if day is not None and contract.partition_by is not None:
        own = own.filter(pc.fill_null(pc.equal(day_of(own.column(contract.partition_by)), pa.scalar(day, pa.date32())), False))
    if rows.num_rows == 0 or own.num_rows == 0:
        return rows
    key = list(contract.key)
    return rows.filter(rows_not_in(rows.select(key), own.select(key)))


def restatements(
    state: AppendState, changed: Iterable[object], restated: Callable[[str, frozenset[object]], Iterable[tuple[object, pa.Table]]], contract: Contract
) -> Iterator[pa.Table]:
    """The rows (stamped) that batches recorded after an append's position wrote to a ``changed`` day and skipped as unchanged.

    ``restated(batch, days)`` gives a batch's rows of those days again, as ``(day, rows)``.
    """
    wanted: dict[tuple[dt.datetime, str], set[object]] = {}
    for day in changed:
        for name, when in state.later.get(day, {}).items():
            wanted.setdefault((when, name), set()).add(day)
    for (when, name), days in sorted(wanted.items(), key=lambda item: item[0]):
        for day, rows in restated(name, frozenset(days)):
            if day in days:
                fresh = unwritten_rows(rows.select(contract.column_names).cast(contract.arrow_schema), state, contract, name, day)
                if fresh.num_rows:
                    yield stamped(fresh, when, name)


@dataclass(frozen=True)
class AppendOutcome:
    """What an append did: the snapshot it created (or the current one) and row counts."""

    table: str
    snapshot_id: int | None
    appended: int
    unchanged: int
    already_applied: bool
    attempts: int
    restated: int = 0  # rows of batches recorded later that this append wrote too (they had skipped them as unchanged)


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


def rows_not_in(rows: pa.Table, known: pa.Table) -> pa.Array:
    """Per row of ``rows``: no row of ``known`` (same columns) equals it, as Python's ``==`` on the row tuples says.

    Both tables are sorted together with a side marker, so equal rows are adjacent and a known row comes first
    in its run; nulls equal nulls, ``-0.0`` equals ``0.0``, and a row with a NaN equals nothing (NaN != NaN).
    """
    names = rows.column_names
    both = pa.concat_tables([known.select(names), rows], promote_options="permissive")
    side = np.concatenate([np.zeros(known.num_rows, np.int8), np.ones(rows.num_rows, np.int8)])
    columns, nan = [], np.zeros(both.num_rows, bool)
    for name in names:
        col = both.column(name).combine_chunks()
        if pa.types.is_floating(col.type):
            nan |= pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False)
            col = pc.if_else(pc.equal(col, 0), pa.scalar(0.0, col.type), col)  # -0.0 == 0.0
        columns.append(col)
    table = pa.table([*columns, pa.array(side)], names=[*[f"c{i}" for i in range(len(names))], "side"])
    order = pc.sort_indices(table, sort_keys=[*[(f"c{i}", "ascending") for i in range(len(names))], ("side", "ascending")]).to_numpy()
    same_as_previous = np.ones(len(order), bool)
    same_as_previous[0] = False
    for col in columns:
        ordered = col.take(pa.array(order))
        a, b = ordered.slice(1), ordered.slice(0, len(ordered) - 1)
        equal = pc.or_kleene(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        same_as_previous[1:] &= equal.to_numpy(zero_copy_only=False)
    run = np.cumsum(~same_as_previous) - 1
    run_has_known = (side[order] == 0)[np.flatnonzero(~same_as_previous)]
    matched = np.empty(len(order), bool)
    matched[order] = run_has_known[run] & ~nan[order]
    return pa.array(~matched[known.num_rows :])


def literal(value: object) -> object:
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def changed_rows(rows: pa.Table, latest: pa.Table, contract: Contract) -> pa.Table:
    """Rows of ``rows`` whose key is new or whose values differ from the key's latest version."""
    if latest.num_rows == 0 or rows.num_rows == 0:
        return rows
    return rows.filter(rows_not_in(rows.select(contract.column_names), latest.select(contract.column_names)))


__all__ = [
    "BATCH",
    "RECORDED_AT",
    "AppendOutcome",
    "AppendState",
    "PinnedSnapshot",
    "RowDeletion",
    "SnapshotInfo",
    "append_state",
    "at_or_before",
    "changed_rows",
    "day_of",
    "latest_per_key",
    "literal",
    "restatements",
    "rows_not_in",
    "stamped",
    "table_schema",
    "unwritten_rows",
]
