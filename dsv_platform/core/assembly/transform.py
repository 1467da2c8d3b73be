"""Computing a definition's declarative row transforms (:mod:`dsv_platform.core.config.aggregation` parses them): pure pyarrow.

Kept apart from the parsing so that reading a configuration (``dsv resolve``) never imports pyarrow.
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.config.aggregation import _US, ROUNDING, Aggregation, Derived, TimeBucket, TransformError, ZoneOf
from dsv_platform.core.config.timezones import zone


def _need(rows: pa.Table, columns: tuple[str, ...] | list[str], what: str) -> None:
    missing = [c for c in columns if c not in rows.column_names]
    if missing:
        raise TransformError(f"{what} needs column(s) {missing}; the rows have {rows.column_names}")


def derive(rows: pa.Table, derived: tuple[Derived, ...]) -> pa.Table:
    """``rows`` with every derived column appended (exact decimal product, rounded once)."""
    for d in derived:
        _need(rows, d.multiply, f"derived column {d.name!r}")
        product = pc.multiply(rows.column(d.multiply[0]), rows.column(d.multiply[1]))
        rounded = pc.round(product, ndigits=d.scale, round_mode=ROUNDING[d.rounding])
        rows = rows.append_column(d.name, rounded.cast(pa.decimal128(d.precision, d.scale)))
    return rows


def _offsets_us(instants_us: np.ndarray, tz: ZoneInfo) -> np.ndarray:
    """The UTC offset (microseconds) of ``tz`` at each instant, computed once per distinct instant."""
    distinct, inverse = np.unique(instants_us, return_inverse=True)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    per = [(epoch + dt.timedelta(microseconds=int(v))).astimezone(tz).utcoffset() or dt.timedelta(0) for v in distinct]
    offsets = np.array([int(o / dt.timedelta(microseconds=1)) for o in per], dtype=np.int64)
    return offsets[inverse] if distinct.size else np.zeros(0, dtype=np.int64)


def bucket_columns(rows: pa.Table, bucket: TimeBucket, zone_of: ZoneOf = zone) -> pa.Table:
    """``rows`` with the bucket's start instant (UTC), local wall-clock label, UTC offset in minutes and local date."""
    _need(rows, [bucket.column], "the time bucket")
    column = rows.column(bucket.column)
    if column.null_count:
        raise TransformError(f"time bucket column {bucket.column!r} has {column.null_count} null value(s)")
    ticks = np.asarray(pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64()).to_numpy(), dtype=np.int64)
    offset = _offsets_us(ticks, zone_of(bucket.timezone))
    local = ticks + offset
    every = int(bucket.every / dt.timedelta(microseconds=1))
    local_start = local - np.mod(local, every)
    add: dict[str, pa.Array] = {bucket.start: pa.array(local_start - offset, pa.int64()).cast(pa.timestamp("us", tz="UTC"))}
    wall = pa.array(local_start, pa.int64()).cast(pa.timestamp("us"))
    if bucket.local:
        add[bucket.local] = pc.strftime(wall, format="%Y-%m-%dT%H:%M")
    if bucket.offset_minutes:
        add[bucket.offset_minutes] = pa.array(offset // (60 * _US), pa.int32())
    if bucket.local_date:
        add[bucket.local_date] = pc.cast(wall, pa.date32())
    for name, values in add.items():
        rows = rows.append_column(name, values)
    return rows


def aggregate(rows: pa.Table, aggregation: Aggregation, zone_of: ZoneOf = zone) -> pa.Table:
    """One row per group (and bucket), with each measure; nulls are skipped (a count counts non-null values)."""
    _need(rows, list(aggregation.inputs), "the aggregation")
    if aggregation.bucket is not None:
        rows = bucket_columns(rows, aggregation.bucket, zone_of)
    keys = [*aggregation.group_by, *(aggregation.bucket.outputs if aggregation.bucket else ())]
    grouped = rows.group_by(keys, use_threads=False).aggregate([(m.column, m.function) for m in aggregation.measures])
    out = grouped.select([*keys, *(f"{m.column}_{m.function}" for m in aggregation.measures)])
    return out.rename_columns([*keys, *(m.name for m in aggregation.measures)])


def transform(rows: pa.Table, derived: tuple[Derived, ...], aggregation: Aggregation | None, zone_of: ZoneOf = zone) -> pa.Table:
    """Derived columns, then the aggregation (if any)."""
    rows = derive(rows, derived)
    return aggregate(rows, aggregation, zone_of) if aggregation is not None else rows
