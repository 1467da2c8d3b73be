"""The Definitions built from the configuration folder: names, ranged runs, checks, the sensor, the schedule, platform.yaml modules."""

import dataclasses
import datetime as dt
import json
import os

import dagster as dg
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import FRAUD_SOURCES, ROWS_PER_DAY, dagster_env, drop, range_tags, settings_at

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)
DAYS = [d.isoformat() for d in DOMAIN.days(3)]


@pytest.fixture
def env(tmp_path, monkeypatch):
    with dagster_env(tmp_path, monkeypatch) as e:
        yield e


def _materialize(defs, instance, selection, partition=None, run_config=None, tags=None):
    assets = [*defs.assets]
    result = dg.materialize(assets, selection=selection, partition_key=partition, instance=instance, resources=defs.resources, run_config=run_config, tags=tags)
    assert result.success
    return result


def test_definitions_load():
    defs = build_defs(settings_at(__import__("pathlib").Path("/tmp/dsv-never-written")))
    dg.Definitions.validate_loadable(defs)
    assert {"daily_ingest_job", "landing_job", "gc_plan_job", "privacy_deletion_job", "rehearsal_job", "integrity_scan_job"} <= {j.name for j in defs.jobs}
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {f"{kind}/{s}" for kind in ("raw", "canonical") for s in FRAUD_SOURCES} <= keys
    assert {"labels/fraud", "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v5/splits", "models/fraud_model"} <= keys
    assert "sample_source" not in defs.resources


def test_definitions_module_exposes_defs(tmp_path, monkeypatch):
    monkeypatch.setenv("DSV_HOME", str(tmp_path))
    import importlib

    import dsv_platform.definitions as module

    module = importlib.reload(module)
    assert isinstance(module.defs, dg.Definitions)
    assert dg.AssetKey.from_user_string("canonical/transactions") in module.defs.resolve_asset_graph().get_all_asset_keys()


def test_a_configuration_without_python_builds_its_assets(tmp_path):
    settings = dataclasses.replace(settings_at(tmp_path / "dsv"), config_dir=write_config(tmp_path / "config"))
    defs = build_defs(settings)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"raw/meters", "canonical/meters", "raw/calibration", "canonical/calibration"} <= keys
    assert {"datasets/meter_readings/v1", "datasets/meter_readings/v1/splits"} <= keys
    assert not any(k.startswith(("labels_", "fraud")) for k in keys)
    snapshot = graph.get(dg.AssetKey.from_user_string("datasets/meter_readings/v1"))
    assert {p.to_user_string() for p in snapshot.parent_keys} == {f"canonical/{s}{head}" for s in ("meters", "calibration") for head in ("", "/head")}
    assert "parquet" in graph.get(dg.AssetKey(["raw", "meters"])).kinds and "jsonl" in graph.get(dg.AssetKey(["raw", "calibration"])).kinds


def test_a_dagster_module_that_does_not_import_is_a_one_line_config_error(tmp_path):
    config = write_config(tmp_path / "config", {"platform.yaml": "dagster_modules: [no_such_module.defs]\n"})
    with pytest.raises(ConfigError, match=r"platform\.yaml.*dagster_modules.*no_such_module\.defs") as err:
        build_defs(dataclasses.replace(settings_at(tmp_path / "dsv"), config_dir=config))
    assert "\n" not in str(err.value)


def test_a_partition_range_is_one_run_then_labels(env):
    settings, defs, instance = env
    drop(settings.drop_folder, [events.daily_batch(DOMAIN, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    result = _materialize(defs, instance, "group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1]))
    assert len(instance.get_runs()) == 1
    mats = result.asset_materializations_for_node("canonical__transactions")
    assert sorted(m.partition for m in mats) == DAYS
    assert mats[0].metadata["rows"].value == 3 * ROWS_PER_DAY and len(mats[0].metadata["content_hash"].value) == 64
    checks = result.get_asset_check_evaluations()
    assert {c.check_name for c in checks} == {"batch_is_readable", "rows_satisfy_contract"} and all(c.passed for c in checks)
    first = _materialize(defs, instance, "canonical/transactions", DAYS[0])
    again = _materialize(defs, instance, "canonical/transactions", DAYS[0])
    [a], [b] = first.asset_materializations_for_node("canonical__transactions"), again.asset_materializations_for_node("canonical__transactions")
    assert a.tags["dagster/data_version"] == b.tags["dagster/data_version"] and a.metadata["rows"].value == ROWS_PER_DAY
    labels = _materialize(defs, instance, "labels/fraud", "v6")
    [lm] = labels.asset_materializations_for_node("labels__fraud")
    assert lm.metadata["rows"].value == 3 * ROWS_PER_DAY and lm.metadata["label"].value == "fraud:v6"


def test_malformed_rows_are_quarantined_and_recorded_by_the_check(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [events.malformed_batch(DOMAIN, DOMAIN.start)])
    _materialize(defs, instance, "raw/transactions", DAYS[0], run_config={"ops": {"raw__transactions": {"config": {"files": [name]}}}})
    result = _materialize(defs, instance, "canonical/transactions", DAYS[0])
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["rows_quarantined"].value == 5
    [m] = result.asset_materializations_for_node("canonical__transactions")
    assert m.metadata["rows"].value == ROWS_PER_DAY - 5


def test_garbled_batch_fails_the_raw_check(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [events.garbled_batch(DOMAIN.start)])
    result = _materialize(defs, instance, "raw/transactions", DAYS[0], run_config={"ops": {"raw__transactions": {"config": {"files": [name]}}}})
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and "CSV" in check.metadata["quarantined"].value.records[0].data["reason"]


def test_without_files_a_run_lands_the_drop_folder_files_of_its_days(env):
    settings, defs, instance = env
    drop(settings.drop_folder, [events.daily_batch(DOMAIN, "transactions", dt.date.fromisoformat(d)) for d in DAYS])
    result = _materialize(defs, instance, "raw/transactions", DAYS[1])
    [m] = result.asset_materializations_for_node("raw__transactions")
    assert m.metadata["rows"].value == ROWS_PER_DAY and "`daily`" in m.metadata["batches_landed_now"].value


def test_sensor_requests_landing_for_new_and_changed_files(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [events.daily_batch(DOMAIN, "transactions", DOMAIN.start)])
    (settings.drop_folder / "notes__bad.csv").write_text("x")
    (settings.drop_folder / name.replace(".csv", ".jsonl")).write_text("{}\n")  # transactions land as CSV
    sensor = defs.resolve_sensor_def("drop_folder_sensor")
    resources = {"platform": defs.resources["platform"]}
    with dg.build_sensor_context(instance=instance, resources=resources) as ctx:  # the platform resource is context-managed (closed after use)
        result = sensor(ctx)
    [req] = result.run_requests
    assert req.partition_key == DAYS[0] and req.asset_selection == [dg.AssetKey(["raw", "transactions"]), dg.AssetKey(["canonical", "transactions"])]
    assert req.run_config["ops"]["raw__transactions"]["config"]["files"] == [name]
    cursor = result.cursor
    assert name in json.loads(cursor)
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as ctx:
        assert sensor(ctx).run_requests == []
    (settings.drop_folder / name).write_bytes(events.renamed_column_batch(DOMAIN, DOMAIN.start).data)
    with dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor) as ctx:
        [changed] = sensor(ctx).run_requests
    assert changed.run_key != req.run_key


def test_schedule_requests_the_previous_day(tmp_path):
    schedule = build_defs(settings_at(tmp_path)).resolve_schedule_def("daily_ingest_schedule")
    ctx = dg.build_schedule_context(scheduled_execution_time=dt.datetime(2026, 6, 10, 3, tzinfo=dt.UTC))
    [req] = list(schedule.evaluate_tick(ctx).run_requests)
    assert req.partition_key == "2026-06-09"


def test_a_sensor_run_records_the_platform_clock_not_the_file_time(env):
    settings, defs, instance = env
    [name] = drop(settings.drop_folder, [events.daily_batch(DOMAIN, "transactions", DOMAIN.start)])
    os.utime(settings.drop_folder / name, (dt.datetime(2001, 1, 1, tzinfo=dt.UTC).timestamp(),) * 2)  # the writer sets this, not the clock
    with dg.build_sensor_context(instance=instance, resources={"platform": defs.resources["platform"]}) as ctx:
        [req] = defs.resolve_sensor_def("drop_folder_sensor")(ctx).run_requests
    before = dt.datetime.now(dt.UTC)
    _materialize(defs, instance, "raw/transactions", req.partition_key, run_config=req.run_config)
    with build_platform(settings) as p:
        [record] = p.landing.records("transactions")
    assert before <= record.recorded_at == record.landed_at <= dt.datetime.now(dt.UTC), record
