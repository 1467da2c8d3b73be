"""Issue 27 item 2 end to end: `dsv build` of a join ``as_known_at: example_time`` on the default (SQLite) home, both engines.

Calibrations are landed by `dsv ingest` in three batches recorded at different times: one recorded late
(after some readings it is valid for) and one correcting an earlier value. The plain definition joins what
is known at the watermark (the late value and the correction leak into earlier readings); the same recipe
with ``as_known_at: example_time`` joins what was known at each reading's instant. Both builds' content
hashes are those of the rows computed here in plain Python (`dsv hash`), in the DuckDB and the Arrow engine.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, write_config
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.test_config_only_source import CALIBRATION_SCHEMA, OUTPUT, READING, _readings

pytestmark = pytest.mark.slow
UTC = dt.UTC
PLAIN = "  - {source: calibration, on: [meter_id], time: read_at, lag: 0d}"
KNOWN = DATASET.replace("meter_readings", "meter_known").replace(PLAIN, PLAIN[:-1] + ", as_known_at: example_time}")
BATCHES = [  # (recorded at, [(meter, calibrated at, factor)])
    (dt.datetime(2025, 12, 30, tzinfo=UTC), [("m-A", dt.datetime(2025, 12, 30, tzinfo=UTC), 1.0125)]),
    (dt.datetime(2026, 1, 2, 12, tzinfo=UTC), [("m-A", dt.datetime(2026, 1, 2, 6, tzinfo=UTC), 0.9875), ("m-B", dt.datetime(2026, 1, 1, 12, tzinfo=UTC), 1.5)]),
    (dt.datetime(2026, 1, 3, tzinfo=UTC), [("m-A", dt.datetime(2025, 12, 30, tzinfo=UTC), 1.02)]),  # corrects the first value
]


def _expected(known_at: bool) -> list[dict]:
    """Per reading of January, the factor of the latest calibration at or before it, among the versions known at the watermark or at the reading."""
    out = []
    for r in _readings():
        if r["read_day"] < dt.date(2026, 1, 1):
            continue
        state: dict[tuple[str, dt.datetime], float] = {}
        for recorded, rows in BATCHES:  # in recording order: a later version of a key replaces the earlier one
            if not known_at or recorded <= r["read_at"]:
                state.update({(m, at): f for m, at, f in rows})
        valid = [(at, f) for (m, at), f in state.items() if m == r["meter_id"] and at <= r["read_at"]]
        out.append({**{k: r[k] for k in ("reading_id", "meter_id", "read_at", "read_day", "kwh")}, "factor": max(valid)[1] if valid else None})
    return out


def test_the_expected_rows_differ_where_a_value_was_recorded_late():
    plain, known = ({r["reading_id"]: r["factor"] for r in _expected(k)} for k in (False, True))
    assert plain["m-B/20260101T18"] == 1.5 and known["m-B/20260101T18"] is None  # recorded on the 2nd at noon
    assert plain["m-A/20260102T06"] == 0.9875 and known["m-A/20260102T06"] == 1.0125  # valid at 06:00, recorded at 12:00
    assert plain["m-A/20260101T00"] == 1.02 and known["m-A/20260101T00"] == 1.0125 and known["m-A/20260103T00"] == 0.9875


@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_dsv_build_joins_what_was_known_at_each_reading(tmp_path, capsys, monkeypatch, engine):
    files = {"sources/calibration.yaml": CALIBRATION.replace("{format: jsonl}", "{format: parquet}"), "datasets/meter_known_v1.yaml": KNOWN}
    config = write_config(tmp_path / "config", files)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("DSV_BUILD_ENGINE", engine)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    pq.write_table(pa.Table.from_pylist(_readings(), schema=READING), tmp_path / "readings.parquet")
    assert dsv("ingest", "meters", str(tmp_path / "readings.parquet")).code == 0
    for i, (recorded, rows) in enumerate(BATCHES):
        landed = [{"meter_id": m, "calibrated_at": at, "calibrated_day": at.date(), "factor": f} for m, at, f in rows]
        table = pa.Table.from_pylist(landed, schema=CALIBRATION_SCHEMA)
        pq.write_table(table, tmp_path / f"cal-{i}.parquet")
        assert dsv("ingest", "calibration", str(tmp_path / f"cal-{i}.parquet"), "--recorded-at", recorded.isoformat()).code == 0
    for ref, known_at in (("meter_readings:v1", False), ("meter_known:v1", True)):
        build = dsv("build", ref, "--json")
        assert build.code == 0, build.err
        pq.write_table(pa.Table.from_pylist(_expected(known_at), schema=OUTPUT), tmp_path / "expected.parquet")
        (tmp_path / "contract.yaml").write_text(yaml.safe_dump(yaml.safe_load(KNOWN if known_at else DATASET)["contract"]), encoding="utf-8")
        hashed = dsv("hash", str(tmp_path / "expected.parquet"), "--contract", str(tmp_path / "contract.yaml"), "--json")
        assert hashed.code == 0, hashed.err
        assert json.loads(build.out)["content_hash"] == json.loads(hashed.out)["content_hash"], ref
