"""Lineage the pipeline records: raw batches -> canonical snapshots -> realizations -> model runs, each edge once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.lineage.lineage import lineage
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform_tests.cli.test_lineage_cmd import dsv
from dsv_platform_tests.defs.support import settings_at

if TYPE_CHECKING:
    from dsv_platform_tests.scenarios.support import World

DOMAIN = FraudDomain(rows_per_day=40)
DAY = DOMAIN.start + dt.timedelta(days=1)


def _nodes(platform: Platform, query: str, *, impact: bool = False) -> set[str]:
    return {n["node"] for n in lineage(platform, query, impact=impact)["nodes"]}


def _edge_count(platform: Platform) -> int:
    return len(platform.registry.lineage_edges())


def test_load_partition_records_raw_batch_and_snapshot_edges_once(tmp_path: Path) -> None:
    platform = build_platform(settings_at(tmp_path))
    spec = platform.config.sources["transactions"]
    first = events.daily_batch(DOMAIN, "transactions", DAY)
    late = events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=3), count=5)
    refs = [platform.landing.land(b, spec).batch_ref for b in (first, late)]
    load = load_partition(platform, spec, DAY)
    assert [b.outcome.appended for b in load.batches] == [40, 5]
    head = f"iceberg_snapshot:transactions@{load.snapshot_id}"
    assert {f"raw_batch:{r}" for r in refs} <= _nodes(platform, head), "provenance of the head reaches both batches"
    first_snapshot = f"iceberg_snapshot:transactions@{load.batches[0].outcome.snapshot_id}"
    assert {first_snapshot, head} <= _nodes(platform, f"raw_batch:{refs[0]}", impact=True)
    recorded = _edge_count(platform)
    assert recorded == 3  # two loaded_into, one succeeded_by
    load_partition(platform, spec, DAY)
    assert _edge_count(platform) == recorded, "a reload records nothing new"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    from dsv_platform_tests.scenarios.support import World  # the fraud world (follows H6's move of the example)

    return World.create(tmp_path_factory.mktemp("lineage"), days=3)


def test_realization_and_model_reach_raw_batches_and_back(world: World) -> None:
    platform = world.platform
    build = world.build()
    run = train_model(platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    again = train_model(platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    assert again.run_hash == run.run_hash
    trained = [e for e in platform.registry.lineage_edges(node=("model_run", run.run_hash)) if e.relation == "trained"]
    assert len(trained) == 1 and trained[0].src == ("realization", build.manifest_hash)
    assert trained[0].attributes["model"] == "fraud_model"
    batches = {r.batch_ref for r in platform.landing.records()}
    up = _nodes(platform, build.ref)
    reached = {n.removeprefix("raw_batch:") for n in up if n.startswith("raw_batch:")}
    assert reached and reached <= batches
    sources = {r.source for r in platform.landing.records() if r.batch_ref in reached}
    assert {"transactions", "account_features"} <= sources, "through the pinned tables (chargebacks of a 3-day world are empty)"
    some = sorted(r.batch_ref for r in platform.landing.records() if r.source == "transactions")[0]
    down = _nodes(platform, f"raw_batch:{some}", impact=True)
    assert {f"realization:{build.manifest_hash}", f"model_run:{run.run_hash}"} <= down


def test_dsv_lineage_model_run_and_the_legacy_model_form(world: World) -> None:
    build = world.build()
    run = train_model(world.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    for query in (f"model_run:{run.run_hash}", f"model:fraud_model@{run.run_hash}"):
        out = dsv(world.settings.home, "lineage", query, "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["start"] == [f"model_run:{run.run_hash}"] and "model:model:" not in out.stdout
        nodes = {n["node"] for n in doc["nodes"]}
        assert f"realization:{build.manifest_hash}" in nodes and any(n.startswith("raw_batch:") for n in nodes)
        assert [r["ref"] for r in doc["retention_roots"]] == [f"model_run:{run.run_hash}"]
