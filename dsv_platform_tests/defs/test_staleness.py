"""Staleness that works (issue 26 item 8): data versions are content, code versions are the recipe, the schema and the label module,
and new canonical data marks the datasets reading it unsynced (through the observed table head).

A real Dagster instance materializes the fraud chain; an append outside the observation window re-pins the
snapshot (a new manifest) with the same rows, and the model downstream stays in sync. Staleness is read with
Dagster's own resolver, the one the UI uses.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.defs import build_defs, keys
from dsv_platform.defs.catalog import code_version, module_source_hash
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform_tests.defs.support import FRAUD_SOURCES, ROWS_PER_DAY, dagster_env, drop, range_tags, settings_at

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)
DAYS = DOMAIN.days(3)
SNAPSHOT, SPLITS, MODEL = "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits", "models/fraud_model"
OUTSIDE = dt.date(2026, 7, 5)  # after the definitions' June observation window


@pytest.fixture
def chain(tmp_path, monkeypatch):
    with dagster_env(tmp_path, monkeypatch) as (settings, defs, instance):
        drop(settings.drop_folder, [events.daily_batch(DOMAIN, s, d) for s in FRAUD_SOURCES for d in DAYS])
        run = lambda selection, **kw: dg.materialize([*defs.assets], selection=selection, instance=instance, resources=defs.resources, **kw)  # noqa: E731
        assert run("group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1])).success
        assert run("labels/fraud", partition_key="v6").success
        assert run([SNAPSHOT, SPLITS, MODEL]).success
        yield settings, defs, instance, run


def _latest(instance: dg.DagsterInstance, key: str) -> dg.AssetMaterialization:
    event = instance.get_latest_materialization_event(dg.AssetKey.from_user_string(key))
    assert event is not None and event.asset_materialization is not None
    return event.asset_materialization


def test_an_append_outside_the_window_re_pins_but_keeps_the_model_in_sync(chain):
    settings, defs, instance, run = chain
    before = _latest(instance, SNAPSHOT)
    assert get_stale_status_resolver(instance, [*defs.assets]).get_status(dg.AssetKey.from_user_string(MODEL)) == StaleStatus.FRESH

    drop(settings.drop_folder, [events.daily_batch(DOMAIN, "transactions", OUTSIDE)])
    assert run(["raw/transactions", "canonical/transactions"], partition_key=OUTSIDE.isoformat()).success
    status = get_stale_status_resolver(instance, [*defs.assets])  # new canonical data: the dataset reading it is unsynced
    assert status.get_status(dg.AssetKey.from_user_string(SNAPSHOT)) == StaleStatus.STALE
    causes = status.get_stale_causes(dg.AssetKey.from_user_string(SNAPSHOT))
    assert [c.dependency.asset_key for c in causes if c.dependency] == [keys.head("transactions")], causes
    assert status.get_status(dg.AssetKey.from_user_string("datasets/fraud_training_set/v5")) in (StaleStatus.MISSING, StaleStatus.STALE)
    assert run([SNAPSHOT]).success
    after = _latest(instance, SNAPSHOT)
    assert after.metadata["manifest_hash"].value != before.metadata["manifest_hash"].value, "the new pin is a new manifest"
    assert after.metadata["content_hash"].value == before.metadata["content_hash"].value, "the same rows"
    assert after.tags["dagster/data_version"] == before.tags["dagster/data_version"] == f"{before.metadata['content_hash'].value}+fraud:v6"

    status = get_stale_status_resolver(instance, [*defs.assets])
    assert status.get_status(dg.AssetKey.from_user_string(SNAPSHOT)) == StaleStatus.FRESH, status.get_stale_causes(dg.AssetKey.from_user_string(SNAPSHOT))
    assert status.get_status(dg.AssetKey.from_user_string(SPLITS)) == StaleStatus.FRESH, status.get_stale_causes(dg.AssetKey.from_user_string(SPLITS))
    assert status.get_status(dg.AssetKey.from_user_string(MODEL)) == StaleStatus.FRESH, status.get_stale_causes(dg.AssetKey.from_user_string(MODEL))


def test_code_versions_are_the_recipe_the_schema_and_the_label_module(tmp_path):
    settings = settings_at(tmp_path / "dsv")
    graph = build_defs(settings).resolve_asset_graph()
    config = load_config(settings.config_dir)
    versions = {k.to_user_string(): graph.get(k).code_version for k in graph.get_all_asset_keys()}
    for d in config.datasets:
        assert versions[f"datasets/{d.name}/{d.version}"] == code_version(d.recipe_hash, d.contract.schema_hash)
    assert versions["datasets/fraud_training_set/v5"] != versions["datasets/fraud_training_set/v6"]  # different recipes
    assert all(versions[f"canonical/{s}"] for s in FRAUD_SOURCES) and versions["datasets/fraud_training_set/v6/splits"]
    label = versions["labels/fraud"]
    source = module_source_hash("dsv_platform.examples.fraud.labels")
    assert source is not None and label is not None and len(label) == 16
    assert module_source_hash("no_such_module_anywhere") is None


def test_observing_a_head_reads_the_tables_current_snapshot(chain):
    settings, defs, instance, _ = chain
    [head] = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and keys.head("transactions") in a.keys]
    from dagster._core.definitions.observe import observe  # the UI's Observe button, in process

    loaded = instance.fetch_observations(keys.head("transactions"), limit=1).records  # the one the canonical load logged
    result = observe([head], instance=instance, resources=defs.resources)
    assert result.success
    [observation] = result.asset_observations_for_node(head.node_def.name)
    with build_platform(settings) as p:
        current = str(p.tables.current_snapshot_id(p.config.sources["transactions"]))
    assert observation.tags["dagster/data_version"] == current, (observation, current)
    assert loaded and loaded[0].asset_observation is not None and loaded[0].asset_observation.tags["dagster/data_version"] == current
