"""Done when (issue 10): a source and dataset described only in YAML, fed Parquet batches through `dsv ingest`,
come out of `dsv build --json` with the content hash `dsv hash` gives the same rows under the output contract.

The configuration is unlike fraud: string keys, timestamp valid time, an as-of join, no labels. Every command is a
real subprocess of the `dsv` console script; the expected rows (the as-of join included) are computed here in plain Python.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, write_config

UTC = dt.UTC
DSV = Path(sys.executable).with_name("dsv")
TS = pa.timestamp("us", tz="UTC")
BASE = [("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", TS), ("read_day", pa.date32()), ("kwh", pa.decimal128(12, 3))]
READING = pa.schema([*BASE, ("site", pa.string())])
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", TS), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
OUTPUT = pa.schema([*BASE, ("factor", pa.float64())])
CALIBRATIONS = [  # (meter, calibrated at, factor); meter "m-C" is never calibrated
    ("m-A", dt.datetime(2025, 12, 30, 0, 0, tzinfo=UTC), 1.0125),
    ("m-A", dt.datetime(2026, 1, 2, 6, 0, tzinfo=UTC), 0.9875),
    ("m-B", dt.datetime(2026, 1, 1, 12, 0, tzinfo=UTC), 1.5),
]


def _readings() -> list[dict]:
    rows = []
    for day in (dt.date(2025, 12, 31), dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)):
        for meter in ("m-A", "m-B", "m-C"):
            for hour in (0, 6, 12, 18):
                at = dt.datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
                kwh = Decimal(f"{(hour + 1) * 1.25 + len(meter):.3f}")
                row = {"reading_id": f"{meter}/{at:%Y%m%dT%H}", "meter_id": meter, "read_at": at, "read_day": day, "kwh": kwh}
                rows.append({**row, "site": None if hour else "roof"})
    return rows


def _expected(readings: list[dict]) -> list[dict]:
    """One row per reading read 2026-01-01..31 with the factor of the meter's latest calibration at or before it (lag 0d)."""
    out = []
    for r in readings:
        if not dt.date(2026, 1, 1) <= r["read_day"] <= dt.date(2026, 1, 31):
            continue
        known = [(at, f) for m, at, f in CALIBRATIONS if m == r["meter_id"] and at <= r["read_at"]]
        out.append({**{k: r[k] for k in ("reading_id", "meter_id", "read_at", "read_day", "kwh")}, "factor": max(known)[1] if known else None})
    return out


def _dsv(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DSV), *args], env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("config-only")
    config = write_config(root / "config", {"sources/calibration.yaml": CALIBRATION.replace("{format: jsonl}", "{format: parquet}")})
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_") and k != "DAGSTER_HOME"}
    env.update(DSV_HOME=str(root / "home"), DSV_CONFIG_DIR=str(config))
    readings = _readings()
    batches = root / "batches"
    batches.mkdir()
    first = [r for r in readings if r["read_day"] <= dt.date(2026, 1, 1)]  # one file over two partition days
    second = pa.Table.from_pylist([r for r in readings if r["read_day"] > dt.date(2026, 1, 1)], schema=READING).rename_columns(
        ["reading_id", "meter_id", "read_at", "read_day", "kwh_total", "site"]  # sent under a renamed column: the compatibility view
    )
    pq.write_table(pa.Table.from_pylist(first, schema=READING), batches / "meters-a.parquet")
    pq.write_table(second, batches / "meters-b.parquet")
    calibration = [{"meter_id": m, "calibrated_at": at, "calibrated_day": at.date(), "factor": f} for m, at, f in CALIBRATIONS]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATION_SCHEMA), batches / "calibration.parquet")
    return root, env, batches, readings


@pytest.fixture(scope="module")
def built(world):
    _, env, batches, _ = world
    ingested = _dsv(env, "ingest", "meters", str(batches / "meters-a.parquet"), str(batches / "meters-b.parquet"), "--json")
    assert ingested.returncode == 0, ingested.stderr[-3000:]
    calibrated = _dsv(env, "ingest", "calibration", str(batches / "calibration.parquet"), "--recorded-at", "2026-01-05T00:00:00+00:00")
    assert calibrated.returncode == 0, calibrated.stderr[-3000:]
    build = _dsv(env, "build", "meter_readings:v1", "--json")
    assert build.returncode == 0, build.stderr[-3000:]
    return json.loads(ingested.stdout), calibrated.stdout, json.loads(build.stdout)


def test_ingest_reports_each_file_with_its_days(built):
    ingested, calibrated, _ = built
    files = {Path(f["file"]).name: f for f in ingested["files"]}
    assert files["meters-a.parquet"]["days"] == ["2025-12-31", "2026-01-01"] and files["meters-a.parquet"]["rows_accepted"] == 24
    assert files["meters-b.parquet"]["days"] == ["2026-01-02", "2026-01-03"] and files["meters-b.parquet"]["rows_rejected"] == 0
    assert (ingested["first_day"], ingested["last_day"]) == ("2025-12-31", "2026-01-03")
    assert all(len(f["digest"]) == 64 and f["batch_ids"] for f in files.values())
    assert "calibration.parquet" in calibrated and "check raw/calibration.batch_is_readable: passed" in calibrated


def test_build_content_hash_equals_dsv_hash_of_the_expected_rows(world, built, tmp_path):
    _, env, _, readings = world
    _, _, doc = built
    assert set(doc) == {"ref", "manifest_hash", "content_hash", "rows", "split_counts"}
    expected = _expected(readings)
    assert doc["rows"] == len(expected) == 36 and sum(doc["split_counts"].values()) == len(expected)
    pq.write_table(pa.Table.from_pylist(expected, schema=OUTPUT), tmp_path / "expected.parquet")
    (tmp_path / "contract.yaml").write_text(yaml.safe_dump(yaml.safe_load(DATASET)["contract"]), encoding="utf-8")
    hashed = _dsv(env, "hash", str(tmp_path / "expected.parquet"), "--contract", str(tmp_path / "contract.yaml"), "--json")
    assert hashed.returncode == 0, hashed.stderr
    assert doc["content_hash"] == json.loads(hashed.stdout)["content_hash"]


def test_the_runs_and_their_checks_are_recorded_on_the_instance(world, built):
    root, *_ = world
    with dg.DagsterInstance.from_config(str(root / "home" / "dagster")) as instance:
        runs = instance.get_runs()
        assert len(runs) >= 3 and all(r.is_success for r in runs)
        for key in ("raw/meters", "canonical/meters", "canonical/calibration", "datasets/meter_readings/v1", "datasets/meter_readings/v1/splits"):
            assert instance.fetch_materializations(dg.AssetKey.from_user_string(key), limit=10).records, key
        checks = [e for r in runs for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)]
        names = {e.dagster_event.event_specific_data.check_name for e in checks}
        assert {"batch_is_readable", "rows_satisfy_contract", "splits_are_entity_disjoint"} <= names


def test_lineage_of_the_realization_reaches_its_raw_batches(world, built):
    _, env, _, _ = world
    _, _, doc = built
    result = _dsv(env, "lineage", doc["ref"], "--json")
    assert result.returncode == 0, result.stderr
    nodes = [n["node"] for n in json.loads(result.stdout)["nodes"]]
    assert any(n.startswith("raw_batch:") for n in nodes), nodes
