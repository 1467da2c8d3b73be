"""A landed batch bigger than one validation chunk loads every row (each record batch its own Iceberg data file)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.ingest.batch import batch_of
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.services.test_generic_realization import T, at

ROWS = 150_000  # more than two of the 65,536-row chunks a landed Parquet batch is validated and appended in


def _readings(n: int) -> pa.Table:
    start = at(3, 0)
    return pa.table({
        "reading_id": pa.array([f"r{i:07d}" for i in range(n)], pa.string()),
        "meter_id": pa.array([f"m-{i % 97}" for i in range(n)], pa.string()),
        "read_at": pa.array([start + dt.timedelta(seconds=i % 86_000) for i in range(n)], T),
        "read_day": pa.array([start.date()] * n, pa.date32()),
        "kwh_total": pa.array([f"{i % 1000}.125" for i in range(n)], pa.string()),
        "site": pa.array([None] * n, pa.string()),
    })  # fmt: skip


def test_a_batch_of_several_chunks_loads_every_row_once(tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_at(tmp_path / "home"), config_dir=write_config(tmp_path / "config"))
    with build_platform(settings) as p:
        spec = p.config.sources["meters"]
        batch = batch_of(_readings(ROWS), source="meters", day=dt.date(2026, 1, 3), batch_id="big", recorded_at=at(4, 0), fmt="parquet")
        [record] = p.landing.land_all(batch, spec)
        load = load_partition(p, spec, record.day)
        assert load.rows == ROWS
        canonical = p.tables.read(spec, partition=record.day)
        assert canonical.num_rows == ROWS and pc.count_distinct(canonical.column("reading_id")).as_py() == ROWS
        files = [t.file for t in p.tables.table(spec).scan().plan_files()]
        assert len({f.file_path for f in files}) == len(files) >= 3
