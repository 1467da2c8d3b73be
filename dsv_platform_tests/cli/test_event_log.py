"""The embedded instance's SQLite event log keeps one engine per shard (``cli/event_log.py``), and stores what Dagster's does.

Runs go through ``open_instance`` (what ``dsv ingest``, ``dsv build`` and the demo run on); a second instance opened
with Dagster's own storage class, as the webserver and the daemon open it, reads every event back.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg
import sqlalchemy
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from dsv_platform.cli.event_log import KEPT_SHARDS, EngineKeepingSqliteEventLog
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


def test_a_run_opens_its_shards_once_and_only_the_latest_shards_stay_open(tmp_path: Path) -> None:
    """Each SQLite connection opened is counted: a run stores its events on a kept connection, not one per event."""
    instance = open_instance(settings_at(tmp_path / "home"))
    storage = instance.event_log_storage
    opened: list[str] = []

    def count(dbapi_connection, _record) -> None:
        opened.append(dbapi_connection.execute("PRAGMA database_list").fetchone()[2])

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", count)
    try:
        first = dg.materialize([numbers], instance=instance)
        shards = {Path(p).stem for p in opened}
        assert first.success and len(_events(instance, first.run_id)) >= 10
        assert first.run_id in shards and "index" in shards
        # Dagster's creation of the shard connects four times, then the kept connection stores every event (the
        # engine-per-event storage connected 21 times for this run's 16 events, and 18 times to the index)
        assert sum(Path(p).stem == first.run_id for p in opened) <= 5 and sum(Path(p).stem == "index" for p in opened) <= 5, opened
        runs = [dg.materialize([numbers], instance=instance) for _ in range(KEPT_SHARDS + 2)]
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "connect", count)
    assert all(r.success for r in runs)
    assert list(storage._engines)[-1] == "index" or runs[-1].run_id in storage._engines
    assert len(storage._engines) == KEPT_SHARDS and first.run_id not in storage._engines
    assert len(_events(instance, first.run_id)) == len(_events(instance, runs[0].run_id))  # a closed shard opens again
    instance.dispose()


def _schema(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            tables = conn.execute(sqlalchemy.text("SELECT name, sql FROM sqlite_master ORDER BY name")).all()
            stamped = conn.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).scalars().all()
            mode = conn.execute(sqlalchemy.text("PRAGMA journal_mode")).scalar_one()
    finally:
        engine.dispose()
    return [(str(n), str(q)) for n, q in tables] + [("journal_mode", str(mode))], [str(v) for v in stamped]


def test_a_new_runs_shard_is_the_one_dagsters_creation_makes(tmp_path: Path) -> None:
    """The copied shard has Dagster's tables, indexes, journal mode and Alembic stamp; Dagster finds nothing to migrate."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage as Stock
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    instance = open_instance(settings_at(tmp_path / "home"))
    storage = instance.event_log_storage
    run = dg.materialize([numbers], instance=instance)
    assert run.success and "_dsv_template" in vars(storage), "the run's shard was copied, not created by Dagster"
    instance.dispose()

    dagsters = Stock(str(tmp_path / "stock"))
    with dagsters.run_connection("a-run") as conn:  # Dagster's own creation of a run's shard
        pass
    copied, made = _schema(Path(storage.path_for_shard(run.run_id))), _schema(Path(dagsters.path_for_shard("a-run")))
    assert copied[0] == made[0] and copied[1] == made[1] and len(made[1]) == 1
    dagsters.dispose()
    beside = Stock(str(Path(storage.path_for_shard(run.run_id)).parent))  # the webserver's view of the copied shard
    with beside.run_connection(run.run_id) as conn:
        stamped, head = check_alembic_revision(get_alembic_config(sys.modules[Stock.__module__].__file__), conn)
    assert stamped == head == made[1][0] and len(beside.get_records_for_run(run.run_id).records) >= 10
    beside.dispose()


def test_an_instance_whose_event_log_is_not_dagsters_sqlite_one_is_left_as_it_is() -> None:
    from dsv_platform.cli.event_log import keep_engines

    with dg.DagsterInstance.ephemeral() as instance:
        before = type(instance.event_log_storage)
        assert keep_engines(instance).event_log_storage.__class__ is before
