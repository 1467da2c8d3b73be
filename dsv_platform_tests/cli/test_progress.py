"""Issue 22 item 7: `dsv ingest` and `dsv build` show their stages on stderr (one line per stage off a terminal, with counts),
stdout stays the JSON result, and every stage is an info message in the Dagster run's event log.

A YAML-only source of meter readings (string keys, an as-of joined calibration), ingested and built by the real
`dsv` process; the event log is read back from the Dagster instance the commands recorded their runs on.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.progress import stage_progress
from dsv_platform.core.progress.stages import SILENT, StageLines, fan_out
from dsv_platform.services.publication.realization import build_realization
from dsv_platform.settings import load_settings
from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, write_config
from dsv_platform_tests.fixtures.cli_runner import run_dsv

UTC = dt.UTC
TS = pa.timestamp("us", tz="UTC")
READING = pa.schema(
    [("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", TS), ("read_day", pa.date32()), ("kwh", pa.decimal128(12, 3)), ("site", pa.string())]
)
CALIBRATION_SCHEMA = pa.schema([("meter_id", pa.string()), ("calibrated_at", TS), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
DAYS = [dt.date(2026, 1, d) for d in (1, 2, 3)]
METERS = ("m-A", "m-B", "m-C", "m-D", "m-E")
LINE = re.compile(r"^dsv: (?P<stage>[a-z ]+): (?P<count>[\d,]+)(?:/(?P<total>[\d,]+))? (?P<unit>\w+) in \d+\.\d\d s(?: \([\d,]+ \w+/s\))?$")
DONE = re.compile(r"^dsv: (?P<stage>[a-z ]+): done in \d+\.\d\d s$")


def _stages(stderr: str) -> dict[str, tuple[int, int | None, str]]:
    """``{stage: (count, total, unit)}`` of the progress lines; every stderr line must be one."""
    found: dict[str, tuple[int, int | None, str]] = {}
    for line in stderr.strip().splitlines():
        m, d = LINE.match(line), DONE.match(line)
        assert m or d, f"not a stage line: {line!r}"
        if m:
            total = m["total"]
            found[m["stage"]] = (int(m["count"].replace(",", "")), int(total.replace(",", "")) if total else None, m["unit"])
        elif d:
            found[d["stage"]] = (0, None, "")
    return found


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("progress")
    parquet = CALIBRATION.replace("{format: jsonl}", "{format: parquet}")
    v2 = DATASET.replace("version: v1", "version: v2")
    config = write_config(root / "config", {"sources/calibration.yaml": parquet, "datasets/meter_readings_v2.yaml": v2})
    env = {"DSV_HOME": str(root / "home"), "DSV_CONFIG_DIR": str(config)}
    rows = [
        {"reading_id": f"{m}/{day}/{h}", "meter_id": m, "read_at": dt.datetime(day.year, day.month, day.day, h, tzinfo=UTC), "read_day": day,
         "kwh": Decimal(f"{h + 1}.250"), "site": None}
        for day in DAYS for m in METERS for h in range(0, 24, 3)
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows[:80], schema=READING), root / "a.parquet")
    pq.write_table(pa.Table.from_pylist(rows[80:], schema=READING), root / "b.parquet")
    at = dt.datetime(2025, 12, 30, tzinfo=UTC)
    calibration = [{"meter_id": m, "calibrated_at": at, "calibrated_day": at.date(), "factor": 1.5} for m in METERS]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATION_SCHEMA), root / "calibration.parquet")
    ingested = run_dsv(env, "ingest", "meters", str(root / "a.parquet"), str(root / "b.parquet"), "--json")
    assert ingested.returncode == 0, ingested.stderr[-3000:]
    calibrated = run_dsv(env, "ingest", "calibration", str(root / "calibration.parquet"), "--recorded-at", "2026-01-05T00:00:00+00:00")
    assert calibrated.returncode == 0, calibrated.stderr[-3000:]
    built = run_dsv(env, "build", "meter_readings:v1", "--json")
    assert built.returncode == 0, built.stderr[-3000:]
    return env, ingested, built, len(rows)


@pytest.mark.slow  # the world: real dsv ingest + build processes (~35 s)
def test_ingest_shows_one_line_per_stage_on_stderr_with_counts(world):
    _, ingested, _, rows = world
    doc = json.loads(ingested.stdout)  # stdout is the JSON report alone
    assert doc["source"] == "meters" and len(doc["files"]) == 2
    stages = _stages(ingested.stderr)
    assert stages["validate"] == (rows, None, "rows")
    assert stages["landing"] == (2, 2, "files")
    assert stages["load"] == (rows, rows, "rows")
    assert stages["partitions"] == (len(DAYS), len(DAYS), "days")


@pytest.mark.slow  # the world: real dsv ingest + build processes (~35 s)
def test_build_json_shows_its_stages_on_stderr_and_stdout_parses(world):
    _, _, built, rows = world
    doc = json.loads(built.stdout)
    assert doc["rows"] == rows
    stages = _stages(built.stderr)
    assert list(stages) == ["pin", "read inputs", "assemble", "split", "gates", "parts", "publish", "alias"]
    assert stages["pin"] == (2, 2, "tables")
    assert stages["read inputs"] == (rows + len(METERS), None, "rows")  # every input row streamed into the engine
    assert stages["assemble"] == stages["split"] == (rows, None, "rows")
    assert stages["parts"] == (len(DAYS), len(DAYS), "partitions")


@pytest.mark.slow  # the world: real dsv ingest + build processes (~35 s)
def test_the_run_event_logs_hold_the_stage_messages(world):
    env, ingested, _, _ = world
    settings = load_settings(env)
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    try:
        runs = instance.get_runs()
        messages = {r.run_id: [e.user_message for e in instance.all_logs(r.run_id) if e.user_message] for r in runs}
    finally:
        instance.dispose()
    build_logs = [m for ms in messages.values() for m in ms if m.startswith("meter_readings:v1: ")]
    for stage in ("pin", "read inputs", "assemble", "split", "gates", "parts", "publish", "alias"):
        assert any(m.startswith(f"meter_readings:v1: {stage}: started") for m in build_logs), stage
        assert any(re.match(rf"meter_readings:v1: {stage}: .* in \d+\.\d\d s", m) for m in build_logs), stage
    ingest_logs = messages[json.loads(ingested.stdout)["run_id"]]
    for stage in ("landing", "load", "partitions"):
        assert any(re.match(rf"meters: {stage}: [\d,]+/[\d,]+ \w+ in ", m) for m in ingest_logs), stage


@pytest.mark.slow  # the world: real dsv ingest + build processes (~35 s)
def test_nothing_is_printed_without_a_reporter(world, capfd):
    env, _, _, rows = world
    platform = build_platform(load_settings(env))
    try:
        capfd.readouterr()
        [v2] = [d for d in platform.config.datasets if d.ref == "meter_readings:v2"]
        build = build_realization(platform, v2)  # a whole build (v2 was never built), no reporter
    finally:
        platform.close()
    assert not build.reused and build.manifest.rows == rows
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_stage_lines_count_total_and_rate_and_fan_out_drops_silence():
    lines: list[str] = []
    ticks = iter([0.0, 2.0, 2.0, 2.5])
    reporter = StageLines(lines.append, clock=lambda: next(ticks))
    assert fan_out(None, SILENT, reporter) is reporter and fan_out(None, SILENT) is SILENT
    reporter.stage("read inputs")
    reporter.advance(3000)
    reporter.advance(1000)
    reporter.stage("parts", total=3, unit="partitions")
    reporter.done()
    reporter.done()  # a second done prints nothing
    assert lines == ["read inputs: 4,000 rows in 2.00 s (2,000 rows/s)", "parts: 0/3 partitions in 0.50 s"]


def test_on_a_terminal_each_stage_is_a_tqdm_bar_on_stderr(capsys):
    reporter = stage_progress(tty=True)
    reporter.stage("load", total=10)
    reporter.advance(4)
    reporter.advance(6)
    reporter.stage("partitions", total=2, unit="days")
    reporter.advance(2)
    reporter.done()
    out, err = capsys.readouterr()
    assert out == "" and "load: 100%" in err and "10.0/10.0" in err and "partitions: 100%" in err and "2/2 " in err and "days/s" in err
    assert isinstance(stage_progress(tty=False), StageLines)
