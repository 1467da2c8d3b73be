"""The embedded instance's SQLite event log keeps one engine per shard (``cli/event_log.py``), and stores what Dagster's does.

Runs go through ``open_instance`` (what ``dsv ingest``, ``dsv build`` and the demo run on); a second instance opened
with Dagster's own storage class, as the webserver and the daemon open it, reads every event back.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from dsv_platform.cli.event_log import EngineKeepingSqliteEventLog
from dsv_platform.cli.runs import open_instance
from dsv_platform_tests.defs.support import settings_at


@dg.asset(check_specs=[dg.AssetCheckSpec("positive", asset="numbers")])
def numbers(context):
    context.log.info("three numbers")
    yield dg.MaterializeResult(metadata={"count": 3})
    yield dg.AssetCheckResult(passed=True, check_name="positive")


def _events(instance: dg.DagsterInstance, run_id: str) -> list[tuple[str, str | None]]:
    return [(e.dagster_event.event_type_value if e.dagster_event else "log", e.step_key) for e in instance.all_logs(run_id)]


def test_runs_on_the_kept_engines_store_every_event_dagsters_own_storage_reads(tmp_path: Path) -> None:
    settings = settings_at(tmp_path / "home")
    instance = open_instance(settings)
    storage = instance.event_log_storage
    assert type(storage) is EngineKeepingSqliteEventLog
    runs = [dg.materialize([numbers], instance=instance) for _ in range(2)]
    assert all(r.success for r in runs)
    stored = {r.run_id: _events(instance, r.run_id) for r in runs}
    assert all(len(events) >= 10 and ("ASSET_MATERIALIZATION", "numbers") in events for events in stored.values())
    assert len(storage._engines) == len(runs) + 1, "one engine per run shard and one for the index, not one per event"
    instance.dispose()
    assert storage._engines == {}

    stock = dg.DagsterInstance.from_config(str(settings.dagster_home))  # the webserver's and the daemon's view
    try:
        assert type(stock.event_log_storage) is SqliteEventLogStorage
        assert {r.run_id: _events(stock, r.run_id) for r in runs} == stored
        check = stock.event_log_storage.get_latest_asset_check_execution_by_key([dg.AssetCheckKey(dg.AssetKey("numbers"), "positive")])
        assert len(check) == 1
        latest = stock.get_latest_materialization_event(dg.AssetKey("numbers"))
        assert latest is not None and latest.run_id == runs[-1].run_id
    finally:
        stock.dispose()


def test_an_instance_whose_event_log_is_not_dagsters_sqlite_one_is_left_as_it_is() -> None:
    from dsv_platform.cli.event_log import keep_engines

    with dg.DagsterInstance.ephemeral() as instance:
        before = type(instance.event_log_storage)
        assert keep_engines(instance).event_log_storage.__class__ is before
