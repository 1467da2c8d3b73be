"""The drop-folder sensor (issue 26 item 11): a bounded stat-based cursor, only changed files read, every partition a batch touches.

A real Dagster instance runs the requested runs; the canonical table is read back to show the late rows loaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.ingest.batch import arrival_time, batch_of
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform_tests.defs.support import ROWS_PER_DAY, dagster_env, drop

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)
D1, D2, D3 = DOMAIN.days(3)
LATE = 7


@pytest.fixture
def env(tmp_path, monkeypatch):
    with dagster_env(tmp_path, monkeypatch) as e:
        yield e


def _tick(defs, instance, cursor=None):  # type: ignore[no-untyped-def]
    with dg.build_sensor_context(instance=instance, resources={"platform": defs.resources["platform"]}, cursor=cursor) as ctx:
        result = defs.resolve_sensor_def("drop_folder_sensor")(ctx)
    assert isinstance(result, dg.SensorResult)
    return result


def _daily(day):  # type: ignore[no-untyped-def]
    return batch_of(DOMAIN.transactions(day), source="transactions", day=day, batch_id="b", recorded_at=arrival_time(day))


def _late_batch() -> pa.Table:
    """D3's transactions and, sent with them, LATE transactions of D1 (new ids): a file named for D3 touching D1 and D3."""
    late = DOMAIN.transactions(D1).slice(0, LATE)
    late = late.set_column(0, "transaction_id", pa.array(late.column("transaction_id").to_numpy() + 9_000_000, pa.int64()))
    return pa.concat_tables([DOMAIN.transactions(D3), late])


def test_a_batch_with_late_rows_requests_every_partition_it_touches_and_they_load(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [batch_of(_late_batch(), source="transactions", day=D3, batch_id="mixed", recorded_at=arrival_time(D3))])
    [req] = _tick(defs, instance).run_requests
    assert req.partition_key is None and (req.tags[RANGE_START], req.tags[RANGE_END]) == (D1.isoformat(), D3.isoformat()), req.tags
    assert req.job_name == "daily_ingest_job" and req.run_config["ops"]["raw__transactions"]["config"]["files"] == [name]
    result = dg.materialize(
        [*defs.assets], selection=["raw/transactions", "canonical/transactions"], tags=dict(req.tags), run_config=req.run_config,
        instance=instance, resources=defs.resources,
    )  # fmt: skip
    assert result.success
    with build_platform(settings) as p:
        rows = p.tables.read(p.config.sources["transactions"])
    days = pc.value_counts(rows.column("event_date")).to_pylist()
    assert {d["values"]: d["counts"] for d in days} == {D1: LATE, D3: ROWS_PER_DAY}, "the late rows of D1 loaded with the file named for D3"


def test_the_cursor_holds_only_present_files_and_an_unchanged_file_is_not_read(env, monkeypatch):
    settings, defs, instance = env
    first, second = drop(settings.drop_folder, [_daily(d) for d in (D1, D2)])
    (settings.drop_folder / "notes.txt").write_text("not a batch")
    tick = _tick(defs, instance)
    assert sorted(r.partition_key for r in tick.run_requests) == [D1.isoformat(), D2.isoformat()]
    cursor = json.loads(tick.cursor)
    assert sorted(cursor) == sorted([first, second, "notes.txt"])

    import dsv_platform.defs.automation as automation

    opened: list[str] = []
    real_digest, real_scan = automation._digest, automation.scan_file
    monkeypatch.setattr(automation, "_digest", lambda path: opened.append(path.name) or real_digest(path))
    monkeypatch.setattr(automation, "scan_file", lambda path, spec: opened.append(path.name) or real_scan(path, spec))
    again = _tick(defs, instance, tick.cursor)
    assert again.run_requests == [] and opened == [], opened  # same stat: nothing opened, nothing requested

    os.utime(settings.drop_folder / first)  # touched, same bytes: read once, nothing requested
    touched = _tick(defs, instance, again.cursor)
    assert touched.run_requests == [] and opened == [first]

    (settings.drop_folder / second).unlink()
    (settings.drop_folder / "notes.txt").unlink()
    gone = json.loads(_tick(defs, instance, touched.cursor).cursor)
    assert sorted(gone) == [first], "a file no longer in the folder leaves the cursor: it is bounded by the folder, not its history"


def test_a_cursor_written_before_stats_were_kept_requests_only_changed_files(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [_daily(D1)])
    [req] = _tick(defs, instance).run_requests
    old = json.dumps({name: req.tags["dsv/digest"]})  # the former cursor: name -> SHA-256
    assert _tick(defs, instance, old).run_requests == []
    Path(settings.drop_folder / name).write_bytes(_daily(D2).data)
    [changed] = _tick(defs, instance, old).run_requests
    assert changed.tags["dsv/digest"] != req.tags["dsv/digest"]


def test_a_file_whose_every_row_the_contract_rejects_requests_nothing_and_says_why(env, capfd):
    settings, defs, instance = env
    bad = DOMAIN.transactions(D1).slice(0, 3)
    bad = bad.set_column(0, "transaction_id", pa.array([None] * 3, pa.int64()))  # a null key: every row rejected
    [name] = drop(settings.drop_folder, [batch_of(bad, source="transactions", day=D1, batch_id="nulls", recorded_at=arrival_time(D1))])
    assert _tick(defs, instance).run_requests == []
    logged = capfd.readouterr().err
    assert "no row satisfies the source's contract" in logged and name in logged


def test_an_unknown_source_or_format_is_not_a_batch_file_never_a_contract_refusal(env, capfd):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [_daily(D1)])
    wrong_format = name.replace(".csv", ".jsonl")  # transactions land as CSV
    unknown = name.replace("transactions__", "meters__")  # a well-formed name of a source this configuration lacks
    for other in (wrong_format, unknown):
        (settings.drop_folder / other).write_bytes((settings.drop_folder / name).read_bytes())
    (settings.drop_folder / name).unlink()
    assert _tick(defs, instance).run_requests == []
    logged = capfd.readouterr().err
    assert "not a batch file" in logged and wrong_format in logged and unknown in logged
    assert "no row satisfies" not in logged, logged
