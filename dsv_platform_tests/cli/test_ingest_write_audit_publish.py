"""Issue 26 item 14 end to end: `dsv ingest` of a batch that fails a blocking per-load rule exits as before (FAILED, 1),
names the staging branch that holds it, and a `dsv build` afterwards does not see its rows (main never moved); GC removes
the branch once it is past its ref age and keeps the batch's landed bytes.

A configuration-only source whose contract blocks test meters (a population rule); real Dagster runs in process, real
embedded stores (pyiceberg SQLite catalog, landing zone, registry).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.bootstrap import build_platform, build_tables
from dsv_platform.cli.main import main
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.retention.gc import GcPolicy
from dsv_platform.services.retention import gc
from dsv_platform.settings import load_settings
from dsv_platform_tests.core.config_support import CALIBRATION, METERS, write_config
from dsv_platform_tests.fixtures.cli_runner import DsvCli

UTC = dt.UTC
READING = pa.schema([("reading_id", pa.string()), ("meter_id", pa.string()), ("read_at", pa.timestamp("us", tz="UTC")), ("read_day", pa.date32()),
                     ("kwh", pa.decimal128(12, 3)), ("site", pa.string())])  # fmt: skip
CALIBRATED = pa.schema([("meter_id", pa.string()), ("calibrated_at", pa.timestamp("us", tz="UTC")), ("calibrated_day", pa.date32()), ("factor", pa.float64())])
BLOCKING = METERS + "expectations:\n  population:\n    - {column: meter_id, not_matching: '^test-'}\n"
GOOD, BAD = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
ZERO = GcPolicy(safety_window=dt.timedelta(0))


def _file(path, day: dt.date, meters: tuple[str, ...]):
    rows = []
    for meter in meters:
        for hour in (0, 6, 12, 18):
            at = dt.datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
            rows.append({"reading_id": f"{meter}/{at:%Y%m%dT%H}", "meter_id": meter, "read_at": at, "read_day": day, "kwh": Decimal("1.500"), "site": "roof"})
    pq.write_table(pa.Table.from_pylist(rows, schema=READING), path)
    return str(path)


@pytest.fixture
def env(tmp_path, monkeypatch):
    config = write_config(tmp_path / "config", {"sources/meters.yaml": BLOCKING, "sources/calibration.yaml": CALIBRATION.replace("jsonl", "parquet")})
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_CONFIG_DIR", str(config))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path


def _build(capsys) -> dict:
    assert main(["build", "meter_readings:v1", "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_a_blocked_ingest_exits_as_before_names_its_branch_and_the_build_does_not_see_its_rows(env, capsys):
    calibration = [{"meter_id": "m-A", "calibrated_at": dt.datetime(2025, 12, 30, tzinfo=UTC), "calibrated_day": dt.date(2025, 12, 30), "factor": 1.5}]
    pq.write_table(pa.Table.from_pylist(calibration, schema=CALIBRATED), env / "calibration.parquet")
    assert main(["ingest", "calibration", str(env / "calibration.parquet")]) == 0, capsys.readouterr().err
    assert main(["ingest", "meters", _file(env / "good.parquet", GOOD, ("m-A", "m-B"))]) == 0, capsys.readouterr().err
    capsys.readouterr()
    first = _build(capsys)
    assert first["rows"] == 8
    code = main(["ingest", "meters", _file(env / "leak.parquet", BAD, ("m-C", "test-X"))])
    [err] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dsv: error: ")]  # besides the stage lines: one
    assert code == FailureKind.FAILED.exit_code == 1, err
    again = _build(capsys)
    assert again["rows"] == 8 and again["content_hash"] == first["content_hash"], "the build must not see the blocked rows"
    assert "blocking asset check failed" in err and "main unchanged, the load is staged on Iceberg branch wap-" in err, err
    branch = re.search(r"branch (wap-[0-9a-f]{16}) \(snapshot (\d+)\)", err)
    assert branch is not None, err
    settings = load_settings()
    tables, meters = build_tables(settings), load_config(settings.config_dir).sources["meters"]
    assert tables.read(meters, partition=BAD).num_rows == 0
    staged = tables.read(meters, partition=BAD, snapshot_id=int(branch.group(2)))
    assert sorted(set(staged.column("meter_id").to_pylist())) == ["m-C", "test-X"]
    assert tables.table(meters).refs()[branch.group(1)].snapshot_id == int(branch.group(2))
    _gc_after_the_ref_age(settings, meters, branch.group(1), int(branch.group(2)))


def _gc_after_the_ref_age(settings, meters, branch: str, head: int) -> None:
    """GC lists the branch as a root until its ref age passes (1 ms here), then removes it and expires its snapshot; the
    blocked batch's raw bytes stay (it never reached main: still awaiting a load that passes)."""
    with build_platform(settings) as platform:
        tables, store = platform.tables, platform.store
        young = gc.plan(platform.registry, store, tables=tables, landing=platform.landing, policy=ZERO)
        assert f"staging:{tables.identifier(meters).split('.')[-1]}#{branch}" in {r.id for r in young.roots}
        tbl = tables.table(meters)
        tbl.manage_snapshots().create_branch(head, branch, max_ref_age_ms=1).commit()  # as if a week had passed
        main = tables.current_snapshot_id(meters)
        plan = gc.plan(platform.registry, store, tables=tables, landing=platform.landing, policy=ZERO)
        report = gc.apply_plan(plan, registry=platform.registry, store=store, tables=tables, dry_run=False, actor="test")
        assert f"meters#{branch}" in report.tags_removed and f"meters@{head}" in report.snapshots_expired
        tbl = tables.table(meters)
        assert branch not in tbl.refs() and tbl.snapshot_by_id(head) is None and tables.current_snapshot_id(meters) == main
        [leak] = [r for r in platform.landing.records("meters", BAD)]
        assert leak.loadable and platform.landing.open(leak).read(4) == b"PAR1", "the blocked batch stays landed"


def test_dsv_staging_lists_a_blocked_loads_branch_and_only_an_operator_discards_it(env, capsys, monkeypatch):
    """`dsv staging list` names the branch, its head, the blocked batch and its rows, and when GC removes it; `dsv staging
    discard` is refused to an identity without the operator role, then removes the branch (audited) and leaves the
    batch landed and main as it was; a second discard is NOT_FOUND."""
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(env / "home"), "DSV_CONFIG_DIR": str(env / "config")})
    assert dsv("ingest", "meters", _file(env / "good.parquet", GOOD, ("m-A",))).code == 0
    blocked = dsv("ingest", "meters", _file(env / "leak.parquet", BAD, ("m-C", "test-X")))
    found = re.search(r"branch (wap-[0-9a-f]{16}) \(snapshot (\d+)\)", blocked.err)
    assert blocked.code == 1 and found is not None, blocked.err
    branch, head = found.group(1), int(found.group(2))
    listed = dsv("staging", "list", "--json")
    [staged] = json.loads(listed.out)
    assert (staged["table"], staged["branch"], staged["snapshot_id"], staged["rows"]) == ("meters", branch, head, 8), listed.out
    assert len(staged["batches"]) == 1 and "leak" in staged["batches"][0], staged
    assert dt.datetime.fromisoformat(staged["expires_at"]) - dt.datetime.fromisoformat(staged["committed_at"]) == dt.timedelta(days=7)
    text = dsv("staging", "list").out
    assert f"meters               {branch}  snapshot {head}  8 rows" in text and "1 staging branch(es)" in text, text
    assert dsv("identity", "create", "wanda").code == 0
    denied = dsv("staging", "discard", "meters", branch, "--reason", "test rows", identity="wanda")
    assert denied.code == FailureKind.ACCESS_DENIED.exit_code and "no grant for role 'operator'" in denied.err, denied.err
    still = json.loads(dsv("staging", "list", "--json").out)
    assert [b["branch"] for b in still] == [branch], "a refused discard leaves the branch"
    gone = dsv("staging", "discard", "meters", branch, "--reason", "test meters leaked into production", "--json")
    assert gone.code == 0 and json.loads(gone.out)["discarded"]["branch"] == branch, gone.err
    assert json.loads(dsv("staging", "list", "--json").out) == []
    [entry] = [e for e in json.loads(dsv("audit", "--json").out) if e["action"] == "staging.discard"]
    assert (entry["target"], entry["identity"], entry["reason"]) == (f"staging:meters#{branch}", "admin", "test meters leaked into production")
    assert entry["detail"] == {"snapshot_id": head, "batches": staged["batches"], "rows": 8}
    again = dsv("staging", "discard", "meters", branch, "--reason", "twice")
    assert again.code == FailureKind.NOT_FOUND.exit_code and f"no staging branch {branch} on canonical table meters" in again.err, again.err
    with build_platform(load_settings()) as platform:
        meters = platform.config.sources["meters"]
        assert platform.tables.read(meters, partition=BAD).num_rows == 0 and platform.tables.read(meters, partition=GOOD).num_rows == 4
        [leak] = platform.landing.records("meters", BAD)
        assert leak.loadable, "the discarded branch's batch stays landed"
