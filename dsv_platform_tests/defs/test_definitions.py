import datetime as dt
import json

import dagster as dg
import pytest

from dsv_platform.defs import build_defs
from dsv_platform.defs.automation import daily_ingest_schedule, drop_folder_sensor
from dsv_platform.domain import FraudDomain, batch_file_name
from dsv_platform.domain import events
from dsv_platform_tests.defs.support import ROWS_PER_DAY, settings_at

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)
DAYS = [d.isoformat() for d in DOMAIN.days(3)]


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    settings = settings_at(tmp_path / "dsv")
    defs = build_defs(settings, rows_per_day=ROWS_PER_DAY)
    with dg.DagsterInstance.ephemeral() as instance:
        yield settings, defs, instance


def _materialize(defs, instance, selection, partition, run_config=None):
    assets = [*defs.assets]
    result = dg.materialize(assets, selection=selection, partition_key=partition, instance=instance, resources=defs.resources, run_config=run_config)
    assert result.success
    return result


def test_definitions_load():
    defs = build_defs(settings_at(__import__("pathlib").Path("/tmp/dsv-never-written")), rows_per_day=ROWS_PER_DAY)
    dg.Definitions.validate_loadable(defs)
    assert {"daily_ingest_job", "landing_job"} <= {j.name for j in defs.jobs}


def test_definitions_module_exposes_defs(tmp_path, monkeypatch):
    monkeypatch.setenv("DSV_HOME", str(tmp_path))
    import importlib

    import dsv_platform.definitions as module

    module = importlib.reload(module)
    assert isinstance(module.defs, dg.Definitions)
    assert module.defs.resolve_asset_graph().get(dg.AssetKey("canonical_transactions")) is not None


def test_backfill_raw_and_canonical_then_labels(env):
    settings, defs, instance = env
    raw_and_canonical = "group:raw or group:canonical"
    for day in DAYS:
        result = _materialize(defs, instance, raw_and_canonical, day)
    mats = {m.asset_key.to_user_string(): m for m in result.asset_materializations_for_node("canonical_transactions")}
    tx = mats["canonical_transactions"]
    assert tx.metadata["rows"].value == ROWS_PER_DAY and len(tx.metadata["content_hash"].value) == 64
    checks = result.get_asset_check_evaluations()
    assert checks and all(c.passed for c in checks)
    again = _materialize(defs, instance, "canonical_transactions", DAYS[0])
    [m] = again.asset_materializations_for_node("canonical_transactions")
    first = instance.fetch_materializations(dg.AssetKey("canonical_transactions"), limit=10).records
    versions = {r.asset_materialization.partition: r.asset_materialization.tags["dagster/data_version"] for r in first}
    assert m.tags["dagster/data_version"] == versions[DAYS[0]]
    labels = _materialize(defs, instance, "labels_fraud", "v6")
    [lm] = labels.asset_materializations_for_node("labels_fraud")
    assert lm.metadata["rows"].value == 3 * ROWS_PER_DAY and lm.metadata["label"].value == "fraud:v6"


def test_malformed_rows_are_quarantined_and_recorded_by_the_check(env):
    settings, defs, instance = env
    settings.drop_folder.mkdir(parents=True)
    bad = events.malformed_batch(DOMAIN, DOMAIN.start)
    (settings.drop_folder / batch_file_name("transactions", DOMAIN.start, "resend")).write_bytes(bad.data)
    config = {"ops": {"raw_transactions": {"config": {"drop_files": [batch_file_name("transactions", DOMAIN.start, "resend")]}}}}
    _materialize(defs, instance, "raw_transactions", DAYS[0], run_config=config)
    result = _materialize(defs, instance, "canonical_transactions", DAYS[0])
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["rows_quarantined"].value == 5
    [m] = result.asset_materializations_for_node("canonical_transactions")
    assert m.metadata["rows"].value == ROWS_PER_DAY - 5


def test_garbled_batch_fails_the_raw_check(env):
    settings, defs, instance = env
    settings.drop_folder.mkdir(parents=True)
    (settings.drop_folder / batch_file_name("transactions", DOMAIN.start, "daily")).write_bytes(events.garbled_batch(DOMAIN.start).data)
    config = {"ops": {"raw_transactions": {"config": {"drop_files": [batch_file_name("transactions", DOMAIN.start, "daily")]}}}}
    result = _materialize(defs, instance, "raw_transactions", DAYS[0], run_config=config)
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and "CSV" in check.metadata["quarantined"].value


def test_sensor_requests_landing_for_new_and_changed_files(env):
    settings, defs, instance = env
    settings.drop_folder.mkdir(parents=True)
    name = batch_file_name("transactions", DOMAIN.start, "manual")
    (settings.drop_folder / name).write_bytes(events.daily_batch(DOMAIN, "transactions", DOMAIN.start).data)
    (settings.drop_folder / "notes__bad.csv").write_text("x")
    resources = {"platform": defs.resources["platform"]}
    with dg.build_sensor_context(instance=instance, resources=resources) as ctx:  # the platform resource is context-managed (closed after use)
        result = drop_folder_sensor(ctx)
    [req] = result.run_requests
    assert req.partition_key == DAYS[0] and req.asset_selection == [dg.AssetKey("raw_transactions")]
    assert req.run_config["ops"]["raw_transactions"]["config"]["drop_files"] == [name]
    cursor = result.cursor
    assert name in json.loads(cursor)
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as ctx:
        assert drop_folder_sensor(ctx).run_requests == []
    (settings.drop_folder / name).write_bytes(events.renamed_column_batch(DOMAIN, DOMAIN.start).data)
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as ctx:
        [changed] = drop_folder_sensor(ctx).run_requests
    assert changed.run_key != req.run_key


def test_schedule_requests_the_previous_day(tmp_path):
    schedule = build_defs(settings_at(tmp_path), rows_per_day=ROWS_PER_DAY).get_schedule_def(daily_ingest_schedule.name)
    ctx = dg.build_schedule_context(scheduled_execution_time=dt.datetime(2026, 6, 10, 3, tzinfo=dt.UTC))
    [req] = list(schedule.evaluate_tick(ctx).run_requests)
    assert req.partition_key == "2026-06-09"
