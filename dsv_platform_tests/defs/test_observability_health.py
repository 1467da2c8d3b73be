"""Issue 27 item 3 in the Dagster definitions: the snapshot asset's lag from valid time, and consumption health on
``dataset_observability``.

A real world (SQLite catalog and registry, local encrypted objects, the fraud sources of June arriving at 02:00 the
next morning); the snapshot is materialized by Dagster, read through the real ``open_dataset`` (once with an object
damaged on disk), and the observability asset shows the reads per version and plots the totals.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dsv_platform import open_dataset
from dsv_platform.core.errors import CorruptError
from dsv_platform.defs import build_defs
from dsv_platform.defs.rehearsal import dataset_observability
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.reproduce_support import corrupted

SNAPSHOT = "datasets/fraud_training_set/v6"


def _asset(defs: dg.Definitions, name: str) -> dg.AssetsDefinition:
    return next(a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string(name) in a.keys)  # type: ignore[union-attr]


def test_snapshot_metadata_and_observability_asset_show_lag_and_consumption_health(tmp_path: Path) -> None:
    world = World.create(settings=load_settings({}).with_home(tmp_path / "dsv"), rows_per_day=60, days=3)
    defs = build_defs(world.settings)
    with dg.DagsterInstance.ephemeral() as instance:
        built = dg.materialize([_asset(defs, SNAPSHOT)], resources=defs.resources, instance=instance, selection=[SNAPSHOT])
        assert built.success
        [snap] = [e.materialization.metadata for e in built.get_asset_materialization_events() if e.asset_key == dg.AssetKey.from_user_string(SNAPSHOT)]
        arrival, compute, event = (snap[f"lag_{k}_s"].value for k in ("arrival", "compute", "event"))
        assert arrival == 2 * 3600 and compute > 86400 and event == pytest.approx(arrival + compute)  # plotted per materialization
        assert snap["lag"].value == {"event_s": event, "arrival_s": arrival, "compute_s": compute}

        ref = str(snap["ref"].value)
        with open_dataset(ref, settings=world.settings) as ds:
            ds.to_arrow()
            first = ds.partitions[0]
        with corrupted(world.store, first.object), open_dataset(ref, settings=world.settings) as ds, pytest.raises(CorruptError):
            ds.to_arrow()
        seen = dg.materialize([dataset_observability], resources=defs.resources, instance=instance)
    [meta] = [e.materialization.metadata for e in seen.get_asset_materialization_events()]
    rows = {(r.data["definition"], r.data["version"]): r.data for r in meta["consumption"].value.records}
    version = world.registry.find_by_manifest_hash(str(snap["manifest_hash"].value)).human_version  # type: ignore[union-attr]
    v6 = rows[("fraud_training_set:v6", version)]
    assert (v6["consumers"], v6["opens"], v6["reads"], v6["missing"], v6["corrupt"]) == (1, 2, 2, 0, 1)
    assert 0 < v6["ttfb p50 s"] <= v6["ttfb max s"] and v6["bytes/s"] > 0 and v6["rows/s"] > 0
    assert (meta["consumption_reads"].value, meta["consumption_corrupt_objects"].value, meta["consumption_missing_objects"].value) == (2, 1, 0)
    assert meta["consumption_ttfb_max_s"].value == v6["ttfb max s"]
    lags = {r.data["definition"]: r.data for r in meta["definitions"].value.records}["fraud_training_set:v6"]
    assert (lags["arrival lag s"], lags["compute lag s"]) == (arrival, lags["publication lag s"])
