"""Multi-part asset keys: the catalog's keys are the keys module's, and an instance upgraded from flat keys still finds
the realization its history recorded under the old key (docs/dagster.md, "Asset keys")."""

import pathlib

import dagster as dg
import pytest

from dsv_platform.core.config import asset_keys
from dsv_platform.defs import build_defs, keys
from dsv_platform.defs.datasets import REF, upstream_ref
from dsv_platform_tests.defs.support import FRAUD_SOURCES, settings_at

SNAPSHOT = keys.snapshot_of("fraud_training_set", "v6")
OLD_REF, NEW_REF = "fraud_training_set:v6@sha256:" + "a" * 64, "fraud_training_set:v6@sha256:" + "b" * 64


def test_the_catalog_keys_mirror_the_tables():
    graph = build_defs(settings_at(pathlib.Path("/tmp/dsv-never-written"))).resolve_asset_graph()
    found = {k.to_user_string() for k in graph.get_all_asset_keys()}
    for s in FRAUD_SOURCES:
        assert {f"raw/{s}", f"canonical/{s}", f"canonical/{s}/head"} <= found
    assert {"datasets/fraud_training_set/v5", "datasets/fraud_training_set/v6/splits", "labels/fraud", "models/fraud_model"} <= found
    flat = {k.to_user_string() for k in graph.get_all_asset_keys() if len(k.path) == 1}
    assert flat == {"reconstructability", "full_reproducibility", "realization_integrity", "dataset_observability"}  # the platform's own audits
    assert not any(k.startswith(("raw_", "canonical_", "labels_")) or k.endswith(("_snapshot", "_splits")) for k in found)


@dg.asset(deps=[SNAPSHOT])
def reader(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"read": upstream_ref(context, SNAPSHOT)})


def _read(instance: dg.DagsterInstance) -> str:
    result = dg.materialize([reader], instance=instance)
    return str(result.asset_materializations_for_node("reader")[0].metadata["read"].value)


def test_a_materialization_recorded_under_the_flat_key_before_the_upgrade_is_still_read():
    with dg.DagsterInstance.ephemeral() as instance:
        with pytest.raises(dg.Failure, match="datasets/fraud_training_set/v6 has not published a realization yet"):
            _read(instance)
        old = dg.AssetKey(asset_keys.legacy_name(tuple(SNAPSHOT.path)) or "")
        assert old == dg.AssetKey("fraud_training_set_v6_snapshot") == keys.legacy(SNAPSHOT)
        instance.report_runless_asset_event(dg.AssetMaterialization(old, metadata={REF: OLD_REF}))
        assert _read(instance) == OLD_REF  # the upgraded instance's history, under the old key
        instance.report_runless_asset_event(dg.AssetMaterialization(SNAPSHOT, metadata={REF: NEW_REF}))
        assert _read(instance) == NEW_REF  # once the new key has one, it wins
