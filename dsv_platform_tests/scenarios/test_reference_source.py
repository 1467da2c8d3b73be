"""Issue 23 item 4: a reference table (no ``partition_by``) is a source: landed by `dsv ingest`, corrected, joined.

Before, ``sources/calibration.yaml`` without ``partition_by`` was refused (``key 'partition_by': is required``).
Now its raw and canonical assets are unpartitioned, every batch loads whole into the one partition ``all``,
a correction is a new version (two clocks; the same batch again appends nothing), and the dataset that joins it
as of each reading builds with the content hash of the rows computed here in plain Python. A reference table with no
date column at all (no ``valid_time``) is a lookup of its latest version, in both build engines.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import yaml

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.source import UNPARTITIONED_DAY
from dsv_platform.core.identity.hashing import UNPARTITIONED_KEY
from dsv_platform.settings import load_settings
from dsv_platform_tests.core.config_support import DATASET, write_config
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.test_config_only_source import OUTPUT, READING, _readings

UTC = dt.UTC
REFERENCE = """\
name: calibration
owner: grid
key: [meter_id, calibrated_at]
landing: {format: FORMAT}
valid_time: calibrated_at
entity: meter_id
columns:
  - {name: meter_id, type: string}
  - {name: calibrated_at, type: timestamp, resolution: us}
  - {name: factor, type: float64, scale: 4}
"""
SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", pa.timestamp("us", tz="UTC")), ("factor", pa.float64())])
FIRST = [
    ("m-A", dt.datetime(2025, 12, 30, tzinfo=UTC), 1.0125),
    ("m-A", dt.datetime(2026, 1, 2, 6, tzinfo=UTC), 0.9875),
    ("m-B", dt.datetime(2026, 1, 1, 12, tzinfo=UTC), 1.5),
]
CORRECTION = [("m-B", dt.datetime(2026, 1, 1, 12, tzinfo=UTC), 1.25), ("m-C", dt.datetime(2026, 1, 2, tzinfo=UTC), 0.5)]  # m-B corrected, m-C new


def _write(path: Path, rows: list[tuple], fmt: str) -> Path:
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
    if fmt == "csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return path


def _expected(calibrations: list[tuple]) -> list[dict]:
    latest: dict[tuple, float] = {}
    for meter, at, factor in calibrations:  # a later batch's version of the same key wins
        latest[(meter, at)] = factor
    out = []
    for r in _readings():
        if not dt.date(2026, 1, 1) <= r["read_day"] <= dt.date(2026, 1, 31):
            continue
        known = sorted((at, f) for (m, at), f in latest.items() if m == r["meter_id"] and at <= r["read_at"])
        out.append({**{k: r[k] for k in ("reading_id", "meter_id", "read_at", "read_day", "kwh")}, "factor": known[-1][1] if known else None})
    return out


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_reference_source_lands_corrects_and_joins(tmp_path, capsys, monkeypatch, fmt):
    config = write_config(tmp_path / "config", {"sources/calibration.yaml": REFERENCE.replace("FORMAT", fmt)})
    env = {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    dsv = DsvCli(capsys, monkeypatch, env)
    ext = "csv" if fmt == "csv" else "parquet"
    pq.write_table(pa.Table.from_pylist(_readings(), schema=READING), tmp_path / "readings.parquet")
    meters = dsv("ingest", "meters", str(tmp_path / "readings.parquet"))
    assert meters.code == 0 and "rows accepted 48, rejected 0" in meters.out, meters.out + meters.err
    first = dsv("ingest", "calibration", str(_write(tmp_path / f"cal-1.{ext}", FIRST, fmt)), "--recorded-at", "2026-01-05T00:00:00+00:00", "--json")
    assert first.code == 0, first.err
    doc = json.loads(first.out)
    assert (doc["first_day"], doc["last_day"], doc["files"][0]["days"], doc["files"][0]["rows_accepted"]) == ("all", "all", ["all"], 3)
    fix = _write(tmp_path / f"cal-2.{ext}", CORRECTION, fmt)
    second = dsv("ingest", "calibration", str(fix), "--recorded-at", "2026-01-06T00:00:00+00:00")
    assert second.code == 0, second.err
    assert "canonical/calibration over all..all" in second.out and "days all  rows accepted 2, rejected 0" in second.out, second.out

    settings = load_settings(env)
    with build_platform(settings) as p:
        spec = p.config.sources["calibration"]
        assert not spec.partitioned
        assert p.tables.current_snapshot_id(p.config.sources["meters"]) is not None, p.tables.table_names()
        assert [r.day for r in p.landing.records("calibration")] == [UNPARTITIONED_DAY, UNPARTITIONED_DAY]
        history = p.tables.read(spec, history=True)
        assert history.num_rows == 5, "the correction is a new version of m-B's row; the first stays"
        before = p.tables.read(spec, as_of=dt.datetime(2026, 1, 5, 12, tzinfo=UTC))
        assert sorted(before.column("factor").to_pylist()) == [0.9875, 1.0125, 1.5], "as known at T: before the correction"
        now = p.tables.read(spec)
        assert sorted(now.column("factor").to_pylist()) == [0.5, 0.9875, 1.0125, 1.25], "as corrected now"
        snapshot = p.tables.current_snapshot_id(spec)

    again = dsv("ingest", "calibration", str(fix), "--recorded-at", "2026-01-06T00:00:00+00:00")
    assert again.code == 0, again.err
    with build_platform(settings) as p:
        tbl = p.tables.table(p.config.sources["calibration"])
        assert p.tables.current_snapshot_id(p.config.sources["calibration"]) == snapshot, [(s.snapshot_id, s.summary) for s in tbl.snapshots()]
    copy = tmp_path / f"cal-copy.{ext}"
    copy.write_bytes(fix.read_bytes())
    renamed = dsv("ingest", "calibration", str(copy), "--recorded-at", "2026-01-07T00:00:00+00:00")
    assert renamed.code == 0, renamed.err
    with build_platform(settings) as p:
        spec = p.config.sources["calibration"]
        history = p.tables.read(spec, history=True)
        assert history.num_rows == 5, history.to_pylist()

    build = dsv("build", "meter_readings:v1", "--json")
    assert build.code == 0, build.err
    built = json.loads(build.out)
    expected = _expected(FIRST + CORRECTION)
    assert built["rows"] == len(expected) == 36
    assert any(r["factor"] == 1.25 for r in expected) and any(r["factor"] == 0.5 for r in expected)
    pq.write_table(pa.Table.from_pylist(expected, schema=OUTPUT), tmp_path / "expected.parquet")
    (tmp_path / "contract.yaml").write_text(yaml.safe_dump(yaml.safe_load(DATASET)["contract"]), encoding="utf-8")
    hashed = dsv("hash", str(tmp_path / "expected.parquet"), "--contract", str(tmp_path / "contract.yaml"), "--json")
    assert hashed.code == 0, hashed.err
    assert built["content_hash"] == json.loads(hashed.out)["content_hash"]


    assert UNPARTITIONED_KEY == "all"


REGIONS = """\
name: regions
owner: grid
key: [meter_id]
landing: {format: csv}
columns:
  - {name: meter_id, type: string}
  - {name: region, type: string}
"""
JOIN = "  - {source: calibration, on: [meter_id], time: read_at, lag: 0d}\n"
FACTOR = "    - {name: factor, type: float64, scale: 4, nullable: true}\n"
REGION = "    - {name: region, type: string, nullable: true}\n"
LOOKUP = DATASET.replace(JOIN, JOIN + "  - {source: regions, on: [meter_id]}\n").replace(FACTOR, FACTOR + REGION)


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_reference_table_without_valid_time_is_a_lookup_of_its_latest_version(tmp_path, capsys, monkeypatch, engine):
    """No date column at all: its rows are valid at any time; the join takes the latest version recorded by the watermark (both engines)."""
    files = {"sources/calibration.yaml": REFERENCE.replace("FORMAT", "parquet"), "sources/regions.yaml": REGIONS, "datasets/meter_readings_v1.yaml": LOOKUP}
    config = write_config(tmp_path / "config", files)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("DSV_BUILD_ENGINE", engine)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    pq.write_table(pa.Table.from_pylist(_readings(), schema=READING), tmp_path / "readings.parquet")
    assert dsv("ingest", "meters", str(tmp_path / "readings.parquet")).code == 0
    assert dsv("ingest", "calibration", str(_write(tmp_path / "cal.parquet", FIRST, "parquet")), "--recorded-at", "2026-01-05T00:00:00+00:00").code == 0
    (tmp_path / "regions-1.csv").write_text("meter_id,region\nm-A,north\nm-B,south\n")
    (tmp_path / "regions-2.csv").write_text("meter_id,region\nm-B,east\n")  # m-B moved: a new version
    assert dsv("ingest", "regions", str(tmp_path / "regions-1.csv"), "--recorded-at", "2026-01-05T00:00:00+00:00").code == 0
    assert dsv("ingest", "regions", str(tmp_path / "regions-2.csv"), "--recorded-at", "2026-01-06T00:00:00+00:00").code == 0
    build = dsv("build", "meter_readings:v1", "--json")
    assert build.code == 0, build.err
    region = {"m-A": "north", "m-B": "east", "m-C": None}
    expected = [{**r, "region": region[r["meter_id"]]} for r in _expected(FIRST)]
    schema = pa.schema([*OUTPUT, ("region", pa.string())])
    pq.write_table(pa.Table.from_pylist(expected, schema=schema), tmp_path / "expected.parquet")
    (tmp_path / "contract.yaml").write_text(yaml.safe_dump(yaml.safe_load(LOOKUP)["contract"]), encoding="utf-8")
    hashed = dsv("hash", str(tmp_path / "expected.parquet"), "--contract", str(tmp_path / "contract.yaml"), "--json")
    assert hashed.code == 0, hashed.err
    assert json.loads(build.out)["content_hash"] == json.loads(hashed.out)["content_hash"]
