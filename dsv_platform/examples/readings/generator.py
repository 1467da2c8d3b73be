"""Deterministic meter readings for Q1 2026 on the Berlin clock, and the batches a head-end system sends.

Four sites, five meter ids: site S-01's meter m-001 is replaced by m-101 at
2026-02-16T10:00Z (same site, new id). Readings every 15 minutes (UTC instants),
kWh from a hash of (meter, instant): no randomness, no wall clock. The DST change
of 2026-03-29 falls inside the quarter. Arrivals are explicit: a week's readings
(7-day blocks from 2026-01-01) arrive the next morning; m-003's readings of 2026-02-10 arrive 9 days late; m-004's
of 2026-03-28..31 arrive after publication (:func:`late_batch`); one reading is
corrected on 2026-04-10 (:func:`correction_batch`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from dsv_platform.core.config.timezones import zone
from dsv_platform.core.ingest.batch import RawBatch, arrival_time, batch_of

TZ = "Europe/Berlin"
QUARTER = (dt.date(2026, 1, 1), dt.date(2026, 3, 31))
DST_DAY = dt.date(2026, 3, 29)
STEP = dt.timedelta(minutes=15)
REPLACED_AT = dt.datetime(2026, 2, 16, 10, 0, tzinfo=dt.UTC)
INSTALLED = dt.date(2025, 12, 1)
UTC_TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Meter:
    meter_id: str
    site_id: str
    region: str
    valid_from: dt.date
    since: dt.datetime | None = None  # the first reading instant (default: valid_from's midnight UTC)
    until: dt.datetime | None = None  # the instant the meter was removed (exclusive)

    def reads_at(self, at: dt.datetime) -> bool:
        start = self.since or dt.datetime.combine(self.valid_from, dt.time(), tzinfo=dt.UTC)
        return at >= start and (self.until is None or at < self.until)


METERS = (
    Meter("m-001", "S-01", "north", INSTALLED, until=REPLACED_AT),
    Meter("m-101", "S-01", "north", REPLACED_AT.date(), since=REPLACED_AT),
    Meter("m-002", "S-02", "north", INSTALLED),
    Meter("m-003", "S-03", "south", INSTALLED),
    Meter("m-004", "S-04", "south", INSTALLED),
)
CALIBRATIONS = (  # (meter, valid from, factor)
    ("m-001", INSTALLED, Decimal("1.0000")),
    ("m-002", INSTALLED, Decimal("1.0000")),
    ("m-002", dt.date(2026, 2, 1), Decimal("0.9875")),
    ("m-003", INSTALLED, Decimal("1.0150")),
    ("m-004", INSTALLED, Decimal("1.0000")),
    ("m-101", REPLACED_AT.date(), Decimal("1.0125")),
)
LATE_METER, LATE_DAYS, LATE_ARRIVAL = "m-004", (dt.date(2026, 3, 28), dt.date(2026, 3, 31)), dt.datetime(2026, 4, 5, 6, 0, tzinfo=dt.UTC)
DELAYED_METER, DELAYED_DAY, DELAYED_ARRIVAL = "m-003", dt.date(2026, 2, 10), dt.datetime(2026, 2, 19, 6, 0, tzinfo=dt.UTC)
CORRECTED = ("m-002", dt.datetime(2026, 3, 29, 1, 0, tzinfo=dt.UTC))  # 03:00 CEST, the first hour after the DST change
CORRECTION_ARRIVAL = dt.datetime(2026, 4, 10, 8, 0, tzinfo=dt.UTC)
CORRECTED_KWH = Decimal("2.500")

READINGS_SCHEMA = pa.schema(
    [
        ("meter_id", pa.string()),
        ("read_at", UTC_TS),
        ("read_month", pa.date32()),
        ("kwh", pa.decimal128(12, 3)),
        ("quality", pa.string()),
        ("recorded_at", UTC_TS),
    ]
)
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("valid_from", pa.date32()), ("factor", pa.decimal128(6, 4))])
METERS_SCHEMA = pa.schema([("meter_id", pa.string()), ("site_id", pa.string()), ("region", pa.string()), ("valid_from", pa.date32())])


def quarter_days() -> list[dt.date]:
    first, last = QUARTER
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def local_day_instants(day: dt.date) -> list[dt.datetime]:
    """The UTC instants of the 15-minute readings of local (Berlin) ``day``: 92 on the DST day, else 96."""
    berlin = zone(TZ)
    start = dt.datetime.combine(day, dt.time(), tzinfo=berlin).astimezone(dt.UTC)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=berlin).astimezone(dt.UTC)
    return [start + i * STEP for i in range((end - start) // STEP)]


def kwh_of(meter_id: str, at: dt.datetime) -> Decimal:
    """0.050 to 0.799 kWh from a hash of the meter and instant (a fixed function, no state)."""
    digest = hashlib.sha256(f"{meter_id}|{at.isoformat()}".encode()).digest()
    return Decimal(50 + int.from_bytes(digest[:4], "big") % 750) / 1000


def reading(meter_id: str, at: dt.datetime, recorded_at: dt.datetime, *, kwh: Decimal | None = None, quality: str | None = None) -> dict[str, Any]:
    estimated = int(hashlib.sha256(f"q|{meter_id}|{at.isoformat()}".encode()).hexdigest(), 16) % 97 == 0
    return {
        "meter_id": meter_id,
        "read_at": at,
        "read_month": at.date().replace(day=1),
        "kwh": kwh_of(meter_id, at) if kwh is None else kwh,
        "quality": quality or ("estimated" if estimated else "measured"),
        "recorded_at": recorded_at,
    }


def day_readings(day: dt.date, recorded_at: dt.datetime, meters: Iterable[Meter] = METERS) -> list[dict[str, Any]]:
    """Every meter's readings of local ``day`` (meters in service at each instant), as first sent."""
    return [reading(m.meter_id, at, recorded_at) for at in local_day_instants(day) for m in meters if m.reads_at(at)]


def _late(meter: Meter, day: dt.date) -> bool:
    return (meter.meter_id == LATE_METER and LATE_DAYS[0] <= day <= LATE_DAYS[1]) or (meter.meter_id == DELAYED_METER and day == DELAYED_DAY)


def _readings_batch(rows: list[dict[str, Any]], batch_id: str, recorded_at: dt.datetime) -> RawBatch:
    """A batch of readings named by the first partition day (read_month) its rows touch, so a run over the batches' days loads them all."""
    table = pa.Table.from_pylist(rows, schema=READINGS_SCHEMA)
    day = min(r["read_month"] for r in rows)
    return batch_of(table, source="meter_readings", day=day, batch_id=batch_id, recorded_at=recorded_at)


def reference_batches() -> list[RawBatch]:
    """The meter registry and the calibration table: one batch per valid_from day (its partition), sent the morning before."""
    meters: list[dict[str, Any]] = [{"meter_id": m.meter_id, "site_id": m.site_id, "region": m.region, "valid_from": m.valid_from} for m in METERS]
    cal: list[dict[str, Any]] = [{"meter_id": m, "valid_from": d, "factor": f} for m, d, f in CALIBRATIONS]
    out = []
    for source, rows, schema in (("meters", meters, METERS_SCHEMA), ("calibration", cal, CALIBRATION_SCHEMA)):
        for day in sorted({r["valid_from"] for r in rows}):
            table = pa.Table.from_pylist([r for r in rows if r["valid_from"] == day], schema=schema)
            out.append(batch_of(table, source=source, day=day, batch_id=source, recorded_at=arrival_time(day - dt.timedelta(days=1))))
    return out


def _weeks(days: Sequence[dt.date]) -> list[list[dt.date]]:
    """``days`` in 7-day blocks counted from the quarter's first day (one batch per block)."""
    blocks: dict[int, list[dt.date]] = {}
    for day in sorted(days):
        blocks.setdefault((day - QUARTER[0]).days // 7, []).append(day)
    return list(blocks.values())


def initial_batches(days: Sequence[dt.date] | None = None) -> list[RawBatch]:
    """The registry, calibration and each week's readings as first known (late readings held back)."""
    out = reference_batches()
    for week in _weeks(days or quarter_days()):
        arrived = arrival_time(QUARTER[0] + dt.timedelta(days=(week[0] - QUARTER[0]).days // 7 * 7 + 6))
        rows = [r for day in week for r in day_readings(day, arrived, [m for m in METERS if not _late(m, day)])]
        out.append(_readings_batch(rows, f"week-{week[0].isoformat()}", arrived))
        if DELAYED_DAY in week:
            delayed = [m for m in METERS if m.meter_id == DELAYED_METER]
            out.append(_readings_batch(day_readings(DELAYED_DAY, DELAYED_ARRIVAL, delayed), "late-2026-02-19", DELAYED_ARRIVAL))
    return out


def late_batch(days: Sequence[dt.date] | None = None) -> RawBatch:
    """m-004's readings of 2026-03-28..31, arriving on 2026-04-05 (after the quarter's publication)."""
    wanted = [d for d in (days or quarter_days()) if LATE_DAYS[0] <= d <= LATE_DAYS[1]]
    late = [m for m in METERS if m.meter_id == LATE_METER]
    rows = [r for d in wanted for r in day_readings(d, LATE_ARRIVAL, late)]
    return _readings_batch(rows, "late-2026-04-05", LATE_ARRIVAL)


def correction_batch() -> RawBatch:
    """A new version of one reading (m-002 at 03:00 CEST on the DST day), recorded on 2026-04-10."""
    meter_id, at = CORRECTED
    row = reading(meter_id, at, CORRECTION_ARRIVAL, kwh=CORRECTED_KWH, quality="corrected")
    return _readings_batch([row], "correction-2026-04-10", CORRECTION_ARRIVAL)


def write_batches(folder: str | Path, batches: Iterable[RawBatch]) -> list[Path]:
    """Write ``batches`` into a drop folder under their batch file names (what `dsv ingest` and the sensor read).

    Each file's modification time is its batch's ``recorded_at``, as an extractor might set it; the platform never reads it
    (it records a batch when it lands, or at a time an operator names: docs/trust.md).
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for batch in batches:
        path = root / batch.file_name
        path.write_bytes(batch.data)
        os.utime(path, (batch.recorded_at.timestamp(), batch.recorded_at.timestamp()))
        paths.append(path)
    return paths
