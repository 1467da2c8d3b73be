"""'GC outruns retention': Iceberg expiry set to zero, then GC applied, and every retained model's data still stands.

Three realizations of fraud_training_set:v6 are built over a changing source:
the first is a retained model's training set, the second nothing keeps, the
third is the newest. Every unprotected Iceberg snapshot is expired (the table
owner's retention at zero) and GC is planned and applied with no safety window.
The retained realization must still resolve, re-hash to its content hash and
read its pinned source snapshots; the unretained one must answer EXPIRED.
"""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.core.errors import ExpiredError
from dsv_platform.core.retention.gc import GcPolicy
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.retention import gc
from dsv_platform_tests.scenarios.support import World


def test_gc_outruns_retention_keeps_retained_models_reconstructable(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home")
    day = world.domain.days(2)[1]
    retained = world.build("v6")
    world.registry.add_retention_root("model_version", retained.ref, reason="fraud_model 1 in production", owner="ml-fraud")
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    orphan = world.build("v6")
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=21), count=5)])
    newest = world.build("v6")
    assert len({retained.manifest_hash, orphan.manifest_hash, newest.manifest_hash}) == 3

    expired_snapshots = gc.expire_source_snapshots(world.tables)
    assert expired_snapshots > 0

    store = world.platform.store  # realizations are written encrypted, as in production
    plan = gc.plan(world.registry, store, tables=world.tables, landing=world.zone, policy=GcPolicy(safety_window=timedelta(0)))
    dry = gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables)
    assert open_dataset(orphan.ref, settings=world.settings).manifest_hash == orphan.manifest_hash  # a dry run changes nothing
    gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables, dry_run=False, actor="test")
    assert dry is not None

    assert world.reverify(retained) == retained.manifest.content_hash
    assert world.reverify(newest) == newest.manifest.content_hash
    for pin in retained.pins:
        spec = SOURCES.get(pin.table)
        if spec is not None:
            assert world.tables.read(spec, snapshot_id=pin.snapshot_id).num_rows > 0
    with pytest.raises(ExpiredError, match="EXPIRED"):
        open_dataset(orphan.ref, settings=world.settings)
    why = plan.explain(retained.manifest.partitions[0].object)
    assert why and why[0].root is not None and "fraud_model 1" in str(why[0].root.as_dict())
