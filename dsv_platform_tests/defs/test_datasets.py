"""Dataset assets from definition files: snapshot publishes a realization, splits checks it, the model trains on it."""

import datetime as dt

import dagster as dg
import pytest

from dsv_platform import open_dataset
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.approval import approve
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at
from dsv_platform_tests.scenarios.support import definition

ROWS_PER_DAY = 120
DAYS = ["2026-06-01", "2026-06-02"]


def test_factory_makes_one_asset_set_per_definition_file():
    settings = settings_at(__import__("pathlib").Path("/tmp/dsv-never-written"))
    defs = build_defs(settings)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for d in load_config(settings.config_dir).datasets:
        assert {f"datasets/{d.name}/{d.version}", f"datasets/{d.name}/{d.version}/splits"} <= keys
        parents = {p.to_user_string() for p in graph.get(dg.AssetKey(["datasets", d.name, d.version])).parent_keys}
        assert parents == {f"canonical/{s}" for s in d.sources} | {f"canonical/{s}/head" for s in d.sources} | {"labels/fraud"}
    assert "models/fraud_model" in keys


@pytest.fixture(scope="module")
def materialized(tmp_path_factory):
    home = tmp_path_factory.mktemp("defs-datasets")
    settings = settings_at(home / "dsv")
    defs = build_defs(settings)
    assets = [*defs.assets]
    domain = FraudDomain(rows_per_day=ROWS_PER_DAY)
    drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with dg.DagsterInstance.ephemeral() as instance:
        tags = range_tags(DAYS[0], DAYS[-1])
        ingest = dg.materialize(assets, selection="group:raw or group:canonical", tags=tags, instance=instance, resources=defs.resources)
        assert ingest.success
        for version in ("v5", "v6"):
            assert dg.materialize(assets, selection="labels/fraud", partition_key=version, instance=instance, resources=defs.resources).success
        result = dg.materialize(assets, selection="group:datasets or group:models", instance=instance, resources=defs.resources)
        yield settings, result


def test_snapshot_publishes_a_realization_with_pins_in_metadata(materialized, monkeypatch):
    settings, result = materialized
    assert result.success
    mat = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events() for m in [m.materialization]}
    snap = mat["datasets/fraud_training_set/v6"].metadata
    ref = snap["ref"].value
    ds = open_dataset(ref, settings=settings)
    assert ds.manifest_hash == snap["manifest_hash"].value and ds.verify_content() == snap["content_hash"].value
    assert ds.manifest.labels.version == "v6" and snap["label_version"].value == "fraud:v6"
    tags = {s.tag for s in ds.manifest.sources}
    assert len(tags) == 1 and tags.pop().startswith("fraud_training_set-v6-")
    assert {s.table for s in ds.manifest.sources} == {"transactions", "account_features", "labels_fraud_v6"}
    assert mat["datasets/fraud_training_set/v5"].metadata["label_version"].value == "fraud:v5"


def test_splits_check_passes_and_model_records_its_run(materialized):
    settings, result = materialized
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["splits_are_entity_disjoint"].passed
    mat = {e.materialization.asset_key.to_user_string(): e.materialization for e in result.get_asset_materialization_events()}
    model = mat["models/fraud_model"].metadata
    assert model["ref"].value == mat["datasets/fraud_training_set/v6"].metadata["ref"].value
    assert len(model["run_manifest_hash"].value) == 64
    roots = Registry.from_url(settings.registry_url).list_retention_roots(kind="model_version")
    assert [r.ref for r in roots if r.id == model["retention_root_id"].value] == [f"model_run:{model['run_manifest_hash'].value}"]
    assert definition("v6").entity_column == "account_id"
    # the model's own pins: named for it (issue 27 item 10), on the very snapshots the realization pins
    pins = {(r.data["table"], r.data["snapshot id"], r.data["tag"]) for r in model["model_pins"].value.records}
    sources = {(r.data["table"], r.data["snapshot id"]) for r in model["pinned_snapshots"].value.records}
    assert {(t, sid) for t, sid, _ in pins} == sources and {tag for _, _, tag in pins} == {f"model-fraud_model-{model['run_manifest_hash'].value[:12]}"}


def test_snapshot_metadata_shows_the_state_and_the_approval(materialized):
    settings, result = materialized
    mat = {e.materialization.asset_key.to_user_string(): e.materialization for e in result.get_asset_materialization_events()}
    snap = mat["datasets/fraud_training_set/v5"].metadata
    assert snap["state"].value == "PUBLISHED" and snap["approval"].value.startswith("not approved")
    with Registry.from_url(settings.registry_url) as reg:
        approve(reg, snap["ref"].value, reason="reviewed the v5 report", actor="release")
    defs = build_defs(settings)
    with dg.DagsterInstance.ephemeral() as instance:  # same pinned inputs: the approved realization is reused
        again = dg.materialize([*defs.assets], selection="datasets/fraud_training_set/v5", instance=instance, resources=defs.resources)
    meta = again.asset_materializations_for_node("datasets__fraud_training_set__v5")[0].metadata
    assert meta["ref"].value == snap["ref"].value and meta["reused"].value is True
    # issue 23 item 11: a reused materialization shows the gates of the realization it reused, not an empty table
    first = [(g["name"], g["passed"]) for g in snap["gate_results"].value]
    assert first and sorted((g["name"], g["passed"]) for g in meta["gate_results"].value) == sorted(first)
    assert "splits_are_entity_disjoint" in [r.data["gate"] for r in meta["gates"].value.records] and meta["gates_of"].value.startswith(snap["ref"].value)
    assert meta["state"].value == "ELIGIBLE" and "approved by release" in meta["approval"].value and "reviewed the v5 report" in meta["approval"].value
