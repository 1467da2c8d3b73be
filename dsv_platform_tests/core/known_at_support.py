"""Meter readings and calibration versions (with their recording times) for the ``as_known_at`` tests, and a brute-force oracle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace

import pyarrow as pa

from dsv_platform.core.assembly.known_at import BATCH, RECORDED_AT
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.contracts.contract import parse_contract

UTC = dt.UTC
STAMP = pa.timestamp("us", tz="UTC")


def ts(day: int, hour: int = 0) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, tzinfo=UTC)


def readings(reads: Sequence[tuple[str, dt.datetime]]) -> pa.Table:
    """Meter readings ``[(meter, read_at)]`` (ids r000, r001, ...)."""
    return pa.table(
        {
            "reading_id": [f"r{i:03d}" for i in range(len(reads))],
            "meter_id": pa.array([m for m, _ in reads], pa.string()),
            "read_at": pa.array([t for _, t in reads], STAMP),
            "read_day": pa.array([t.date() for _, t in reads], pa.date32()),
            "kwh": pa.array(["1"] * len(reads)).cast(pa.decimal128(12, 3)),
            "site": pa.array([None] * len(reads), pa.string()),
        }
    )


def versions(rows: Sequence[tuple[str, dt.datetime, float | None, dt.datetime, str]]) -> pa.Table:
    """Calibration versions ``[(meter, calibrated_at, factor, recorded_at, batch)]`` with the system columns."""
    return pa.table(
        {
            "meter_id": pa.array([r[0] for r in rows], pa.string()),
            "calibrated_at": pa.array([r[1] for r in rows], STAMP),
            "calibrated_day": pa.array([r[1].date() for r in rows], pa.date32()),
            "factor": pa.array([r[2] for r in rows], pa.float64()),
            RECORDED_AT: pa.array([r[3] for r in rows], STAMP),
            BATCH: pa.array([r[4] for r in rows], pa.string()),
        }
    )


def latest(table: pa.Table, key: Sequence[str] = ("meter_id", "calibrated_at")) -> pa.Table:
    """Each key's latest version (by recorded time, then batch), without the system columns."""
    best: dict[tuple[object, ...], dict[str, object]] = {}
    for row in table.to_pylist():
        k = tuple(row[c] for c in key)
        if k not in best or (row[RECORDED_AT], row[BATCH]) > (best[k][RECORDED_AT], best[k][BATCH]):
            best[k] = row
    out = pa.Table.from_pylist(list(best.values()), schema=table.schema) if best else table.slice(0, 0)
    return out.drop_columns([RECORDED_AT, BATCH])


def oracle(reads: pa.Table, table: pa.Table, lag: dt.timedelta, max_age: dt.timedelta | None, key: Sequence[str] = ("meter_id", "calibrated_at")) -> list:
    """Per reading, the factor as known at ``read_at - lag``: the state then (latest version per key), then the as-of rule
    (latest ``calibrated_at`` at or before the cutoff, ties to the largest key; ``max_age``)."""
    rows = table.to_pylist()
    out: list[object] = []
    for read in reads.to_pylist():
        cut = read["read_at"] - lag
        state: dict[tuple[object, ...], dict[str, object]] = {}
        for row in rows:
            k = tuple(row[c] for c in key)
            if row[RECORDED_AT] <= cut and (k not in state or (row[RECORDED_AT], row[BATCH]) > (state[k][RECORDED_AT], state[k][BATCH])):
                state[k] = row
        live = [(r["calibrated_at"], k, r) for k, r in state.items() if r["meter_id"] == read["meter_id"] and r["calibrated_at"] is not None]
        live = [t for t in live if t[0] <= cut]
        pick = max(live, key=lambda t: (t[0], t[1]), default=None)
        fresh = pick is not None and (max_age is None or pick[0] >= cut - max_age)
        out.append(pick[2]["factor"] if fresh and pick is not None else None)
    return out


def keyed_spec(spec: SourceSpec, key: Sequence[str], *, reference: bool = False) -> SourceSpec:
    """The calibration source ``spec`` with an int64 ``rev`` column and contract key ``key``; ``reference``: unpartitioned, no valid time."""
    cols = [
        {"name": "meter_id", "type": "string"},
        {"name": "calibrated_at", "type": "timestamp", "resolution": "us"},
        {"name": "calibrated_day", "type": "date"},
        {"name": "factor", "type": "float64", "scale": 4, "nullable": True},
        {"name": "rev", "type": "int64"},
    ]
    if reference:
        return replace(spec, contract=parse_contract({"name": spec.name, "key": list(key), "columns": cols}), valid_time=None)
    return replace(spec, contract=parse_contract({"name": spec.name, "key": list(key), "partition_by": "calibrated_day", "columns": cols}))
