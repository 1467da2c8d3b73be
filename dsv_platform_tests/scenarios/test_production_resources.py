"""The core scenario once on the production resource set: registry and Iceberg SQL catalog on PostgreSQL,
object store and Iceberg warehouse on the loopback S3 server (issue 4, "Tests").

Create the world (land, canonical, labels), build fraud_training_set:v6, play one failure mode (late events)
and rebuild: the old realization still resolves and re-hashes to its content hash, the new one differs, and
``dsv verify`` through the CLI with the same environment passes for both. Then one Dagster asset materializes
with the production resources built from the same Settings.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from dsv_platform import open_dataset
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.production_stores import production_stores
from dsv_platform_tests.scenarios.support import World

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

D = dt.date


@pytest.fixture
def production_env(tmp_path, postgres_server, s3_env) -> dict[str, str]:
    return production_stores(postgres_server, s3_env) | {"DSV_HOME": str(tmp_path / "dsv"), "DSV_ACTOR": "production-scenario"}


def _dsv(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | env  # os.environ carries s3_env's AWS_*
    return subprocess.run([sys.executable, "-m", "dsv_platform.cli.main", *args], env=full, capture_output=True, text=True, timeout=300)


def test_core_scenario_on_postgresql_and_s3(production_env, s3_env):
    settings = load_settings(production_env)
    assert settings.object_store_is_s3 and settings.registry_url.startswith("postgresql") and settings.iceberg_catalog_url.startswith("postgresql")
    world = World.create(settings=settings)

    before = world.build("v6")
    assert world.reverify(before) == before.content_hash
    late = events.late_transactions(world.domain, D(2026, 6, 2), arrived=D(2026, 6, 9), count=7)
    world.ingest([late])
    after = world.build("v6")

    assert world.reverify(before) == before.content_hash
    assert world.reverify(after) == after.content_hash
    assert after.content_hash != before.content_hash and after.ref != before.ref
    moved = {a.key for a in after.manifest.partitions for b in before.manifest.partitions if a.key == b.key and a.hash != b.hash}
    assert moved == {"event_date=2026-06-02"}

    # The stores really are the production ones: objects in the bucket, tables and realizations in PostgreSQL.
    bucket, prefix = settings.object_store.removeprefix("s3://").split("/", 1)
    keys = {o["Key"] for page in s3_env.client().get_paginator("list_objects_v2").paginate(Bucket=bucket) for o in page.get("Contents", [])}
    assert any(k.startswith(f"{prefix}/") for k in keys) and any(k.startswith("warehouse/") for k in keys)
    assert all(p.snapshot_id for p in after.manifest.sources)
    assert Registry.from_url(settings.registry_url).resolve_ref(before.ref, actor="check").manifest_hash == before.manifest_hash

    for build in (before, after):
        out = _dsv(production_env, "verify", build.ref, "--json")
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["ok"] and result["content_hash"] == build.content_hash

    # One Dagster asset with the production resources built from the same Settings, on an ephemeral instance.
    defs = build_defs(settings)
    with dg.DagsterInstance.ephemeral() as instance:
        snap = dg.materialize([*defs.assets], selection="datasets/fraud_training_set/v6", instance=instance, resources=defs.resources)
    assert snap.success
    meta = next(e.materialization.metadata for e in snap.get_asset_materialization_events())
    ds = open_dataset(meta["ref"].value, settings=settings)
    assert ds.verify_content() == meta["content_hash"].value
