"""A source and dataset unlike fraud, described only in YAML: string key, timestamp valid time, an as-of join, no label."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.ingest.batch import batch_of
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization import build_realization, check_splits
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import settings_at

UTC = dt.UTC
T = pa.timestamp("us", tz="UTC")


def at(day: int, hour: int) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, tzinfo=UTC)


READINGS = [  # reading_id, meter_id, read_at, kwh
    ("r1", "m-a", at(3, 8), "1.250"),
    ("r2", "m-b", at(3, 9), "2.000"),
    ("r3", "m-a", at(4, 8), "3.500"),
    ("r4", "m-a", at(5, 23), "4.125"),
    ("r5", "m-c", at(5, 1), "0.500"),
]
CALIBRATIONS = [  # meter_id, calibrated_at, factor
    ("m-a", at(3, 12), 1.01),
    ("m-a", at(5, 0), 0.99),
    ("m-b", at(1, 0), 1.5),
]


def meters_table(rows: list[tuple[str, str, dt.datetime, str]]) -> pa.Table:
    return pa.table(
        {
            "reading_id": pa.array([r[0] for r in rows], pa.string()),
            "meter_id": pa.array([r[1] for r in rows], pa.string()),
            "read_at": pa.array([r[2] for r in rows], T),
            "read_day": pa.array([r[2].date() for r in rows], pa.date32()),
            "kwh_total": pa.array([r[3] for r in rows], pa.string()),  # the sent name; the source's alias maps it to kwh
            "site": pa.array([None] * len(rows), pa.string()),
        }
    )


def calibration_table(rows: list[tuple[str, dt.datetime, float]]) -> pa.Table:
    return pa.table(
        {
            "meter_id": pa.array([r[0] for r in rows], pa.string()),
            "calibrated_at": pa.array([r[1] for r in rows], T),
            "calibrated_day": pa.array([r[1].date() for r in rows], pa.date32()),
            "factor": pa.array([r[2] for r in rows], pa.float64()),
        }
    )


@pytest.fixture
def platform(tmp_path: Path) -> Platform:
    settings = dataclasses.replace(settings_at(tmp_path / "home"), config_dir=write_config(tmp_path / "config"))
    with build_platform(settings) as p:
        yield p


def land_and_load(platform: Platform, source: str, table: pa.Table, batch_id: str, recorded_at: dt.datetime, fmt: str) -> None:
    spec = platform.config.sources[source]
    batch = batch_of(table, source=source, day=recorded_at.date(), batch_id=batch_id, recorded_at=recorded_at, fmt=fmt)  # type: ignore[arg-type]
    for record in platform.landing.land_all(batch, spec):
        load_partition(platform, spec, record.day)


def expected(platform: Platform) -> pa.Table:
    """Each reading with the factor of the latest calibration of its meter at or before the read (none: null)."""
    rows = []
    for rid, meter, read_at, kwh in READINGS:
        known = [c for c in CALIBRATIONS if c[0] == meter and c[1] <= read_at]
        factor = max(known, key=lambda c: c[1])[2] if known else None
        rows.append({"reading_id": rid, "meter_id": meter, "read_at": read_at, "read_day": read_at.date(), "kwh": Decimal(kwh), "factor": factor})
    contract = platform.config.dataset("meter_readings", "v1").contract
    return pa.Table.from_pylist(rows, schema=contract.arrow_schema)


def test_a_yaml_only_source_and_dataset_build_a_realization_whose_hash_is_the_hash_of_the_expected_rows(platform: Platform) -> None:
    # a multi-day parquet batch of readings, then a second one; calibrations as JSON Lines
    land_and_load(platform, "meters", meters_table(READINGS[:3]), "jan-early", at(5, 2), "parquet")
    land_and_load(platform, "meters", meters_table(READINGS[3:]), "jan-5", at(6, 2), "parquet")
    land_and_load(platform, "calibration", calibration_table(CALIBRATIONS), "cal", at(6, 3), "jsonl")
    assert sorted({r.day for r in platform.landing.records("meters")}) == [dt.date(2026, 1, d) for d in (3, 4, 5)]

    definition = platform.config.dataset("meter_readings", "v1")
    build = build_realization(platform, definition)
    want = expected(platform)
    assert build.manifest.rows == 5 and not build.reused
    assert build.content_hash == hash_table(want, definition.contract, partition_by=definition.contract.partition_by).content_hash
    assert build.manifest.labels is None and [g.name for g in build.gates if not g.name.startswith("integrity:")] == [
        "splits_are_entity_disjoint",
        "proportions_within_tolerance",
        "rows_at_least",
        "privacy:subjects_under_deletion",
        "privacy:restricted_columns",
    ]
    assert {p.table for p in build.pins} == {"meters", "calibration"}
    assert sum(build.split_counts.values()) == 5
    assert check_splits(platform, build.ref, definition).report.passed

    again = build_realization(platform, definition)
    assert again.reused and again.manifest_hash == build.manifest_hash


def test_a_late_calibration_recorded_after_the_watermark_is_not_used(platform: Platform) -> None:
    land_and_load(platform, "meters", meters_table(READINGS), "all", at(6, 2), "parquet")
    land_and_load(platform, "calibration", calibration_table(CALIBRATIONS[2:]), "cal-b", at(6, 3), "jsonl")
    definition = platform.config.dataset("meter_readings", "v1")
    first = build_realization(platform, definition)
    rows = open_dataset(platform, first.ref, actor="test").to_arrow().sort_by("reading_id").to_pylist()
    assert [(r["reading_id"], r["factor"]) for r in rows] == [("r1", None), ("r2", 1.5), ("r3", None), ("r4", None), ("r5", None)]
    land_and_load(platform, "calibration", calibration_table(CALIBRATIONS[:2]), "cal-a", at(7, 3), "jsonl")
    second = build_realization(platform, definition)
    assert second.manifest_hash != first.manifest_hash
    assert second.content_hash == hash_table(expected(platform), definition.contract, partition_by="read_day").content_hash
