"""Artifacts: intent first, the dsv-artifact/1 manifest, the footer hash, lineage with activities, GC keeping what an artifact root reaches."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsv_platform.core import canonical_json
from dsv_platform.core.config.timezones import tz_database
from dsv_platform.core.errors import DsvError, NotFoundError
from dsv_platform.core.reproduction.artifact_manifest import footer, validate_manifest
from dsv_platform.core.retention.gc import GcPolicy
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.services.lineage.lineage import lineage, record_activity
from dsv_platform.services.publication.realization import RealizationBuild
from dsv_platform.services.reproduction.artifacts import artifact_runs, locate_artifact, produce_artifact
from dsv_platform.services.retention import gc
from dsv_platform_tests.cli.test_lineage_cmd import dsv
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.artifact_support import CRASHING, DATASET, FAILING, PRODUCER

CODE = {"repo": "/srv/reports", "commit": "ab" * 20, "dirty": False}
THEN = dt.datetime(2026, 4, 1, 6, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("artifacts"), days=3)


@pytest.fixture(scope="module")
def build(world: World) -> RealizationBuild:
    return world.build()


def test_produce_records_the_manifest_footer_files_lineage_and_root(world: World, build: RealizationBuild) -> None:
    before = os.environ.get("TZ")
    run = produce_artifact(world.platform, PRODUCER, inputs={DATASET: DATASET}, parameters={"scale": 2}, seed=3, clock=lambda: THEN, code=CODE)
    assert os.environ.get("TZ") == before, "the pinned TZ is restored after computing"
    doc, mh = run.manifest, run.manifest_hash
    assert validate_manifest(doc) == doc and run.record.state == "COMPLETE"
    assert doc["produced_at"] == "2026-04-01T06:00:00Z" and doc["code"] == CODE
    assert doc["produced_by"] == {"identity": world.platform.actor, "producer": "dsv_platform_tests.services.artifact_support:PRODUCER"}
    assert doc["inputs"] == [{"dataset": DATASET, "ref": DATASET, "snapshot_id": build.manifest_hash, "dataset_hash": build.manifest.content_hash}]
    env = doc["environment"]
    assert env["runner_timezone"] == "Europe/Berlin" and env["tz_database"] == tz_database(["Europe/Berlin"])
    assert env["lockfile_sha256"] == "unknown", "no requirements.lock at a commit of a repository that is not there"
    assert doc["results"]["tz_during_compute"] == "Europe/Berlin" and doc["results"]["after_dst_switch"] == "2026-03-29T03:30:00+02:00"
    assert doc["results"]["scale"] == "2" and doc["seed"] == 3
    store = world.platform.store
    assert store.get(mh) == canonical_json.dumps(doc), "the manifest is stored under its own hash"
    assert footer(mh).encode() in store.get(run.record.files["report.html"])
    assert set(run.record.files) == {"report.html", "rows.csv"}
    for query in (mh, mh[:12], footer(mh), f"sha256:{mh[:16]}", PRODUCER.name):
        assert locate_artifact(world.platform, query).manifest_hash == mh, query
    roots = [r for r in world.registry.list_retention_roots(dt.datetime.now(dt.UTC)) if r.ref == f"artifact:{mh}"]
    assert [r.kind for r in roots] == ["artifact"]

    up = lineage(world.platform, f"artifact:{mh}")
    nodes = {n["node"]: n for n in up["nodes"]}
    assert nodes[f"artifact:{mh}"]["state"] == "COMPLETE" and nodes[f"artifact:{mh}"]["inputs"] == doc["inputs"]
    assert f"realization:{build.manifest_hash}" in nodes
    assert any(n.startswith("iceberg_snapshot:") for n in nodes), "the pinned source snapshots of the input"
    assert {f"object:{d}" for d in run.record.files.values()} <= set(nodes)
    down = lineage(world.platform, build.ref, impact=True)
    assert f"artifact:{mh}" in {n["node"] for n in down["nodes"]}
    # a privacy deletion's governance decision lists the artifact (and its root) among what used the realization
    governed = world.registry.privacy.models_using([build.manifest_hash])
    assert {("artifact", mh), ("retention_root:artifact", f"artifact:{mh}")} <= {(g["kind"], g["id"]) for g in governed}


def test_locate_refuses_what_has_no_manifest(world: World, build: RealizationBuild) -> None:
    with pytest.raises(NotFoundError, match="not reproducible by construction") as info:
        locate_artifact(world.platform, "0" * 12)
    assert info.value.exit_code == 3
    with pytest.raises(NotFoundError, match="no complete artifact 'no_such_report'"):
        locate_artifact(world.platform, "no_such_report")


def test_activities_attach_to_the_artifact_and_dsv_lineage_prints_them(world: World, build: RealizationBuild) -> None:
    run = produce_artifact(world.platform, PRODUCER, inputs={DATASET: build.ref}, parameters={}, seed=4, code=CODE)
    node = f"artifact:{run.manifest_hash}"
    first = record_activity(world.platform, node, "reproduction", {"outcome": "REPRODUCED", "steps": [{"step": 1, "ok": True}]})
    second = record_activity(world.registry, node, "reproduction", {"outcome": "NOT_REPRODUCIBLE"}, actor="auditor")
    assert second > first
    found = lineage(world.platform, node)["activities"]
    assert [(a["id"], a["kind"], a["record"]["outcome"]) for a in found] == [
        (first, "reproduction", "REPRODUCED"),
        (second, "reproduction", "NOT_REPRODUCIBLE"),
    ]
    with pytest.raises(DsvError, match="not a lineage node"):
        record_activity(world.platform, "nonsense", "reproduction", {})
    out = dsv(world.settings.home, "lineage", PRODUCER.name, "--json")  # by name: its newest complete run
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["start"] == [node] and [a["id"] for a in doc["activities"]] == [first, second]
    assert {r["state"] for r in doc["runs"]} == {"COMPLETE"}
    text = dsv(world.settings.home, "lineage", run.manifest_hash[:12])
    assert text.returncode == 0, text.stderr
    assert f"activity #{first} reproduction on {node}" in text.stdout and "outcome NOT_REPRODUCIBLE" in text.stdout
    assert f"input {DATASET} as {build.ref}: realization {build.manifest_hash}" in text.stdout


def test_a_failing_producer_leaves_a_failed_run_never_counted_as_produced(world: World, build: RealizationBuild) -> None:
    with pytest.raises(RuntimeError, match="failed on purpose"):
        produce_artifact(world.platform, FAILING, inputs={DATASET: build.ref}, parameters={}, seed=1, code=CODE)
    [failed] = artifact_runs(world.platform, FAILING.name)
    assert failed.state == "FAILED" and "RuntimeError: the report's compute step failed on purpose" in (failed.error or "")
    assert failed.manifest_hash is None and failed.intent["code"] == CODE and failed.intent["inputs"] == {DATASET: build.ref}
    with pytest.raises(NotFoundError, match=f"run #{failed.id} FAILED"):
        locate_artifact(world.platform, FAILING.name)


def test_the_intent_is_written_before_any_input_is_opened(world: World) -> None:
    missing = f"{DATASET}@sha256:{'0' * 64}"
    with pytest.raises(NotFoundError):
        produce_artifact(world.platform, PRODUCER, inputs={DATASET: missing}, parameters={}, seed=1, code=CODE)
    newest = artifact_runs(world.platform, PRODUCER.name)[0]
    assert newest.state == "FAILED" and newest.intent["inputs"] == {DATASET: missing} and "NOT_FOUND" in (newest.error or "")


def test_a_crash_while_computing_leaves_the_run_intent(world: World, build: RealizationBuild) -> None:
    code = (
        "from dsv_platform.bootstrap import build_platform\n"
        "from dsv_platform.settings import load_settings\n"
        "from dsv_platform.services.reproduction.artifacts import produce_artifact\n"
        "from dsv_platform_tests.services.artifact_support import CRASHING, DATASET\n"
        f"produce_artifact(build_platform(load_settings()), CRASHING, inputs={{DATASET: {build.ref!r}}}, parameters={{}}, seed=1)\n"
    )
    env = {**os.environ, "DSV_HOME": str(world.settings.home)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 17, done.stderr[-2000:]
    [run] = artifact_runs(world.platform, CRASHING.name)
    assert run.state == "INTENT" and run.manifest_hash is None and run.error is None
    assert run.intent["code"]["commit"] != "unknown", "the producer's own checkout is pinned in the intent"
    with pytest.raises(NotFoundError, match=f"run #{run.id} INTENT"):
        locate_artifact(world.platform, CRASHING.name)
    with pytest.raises(NotFoundError, match=f"no complete artifact 'fraud_crashing_report' \\(run #{run.id} INTENT\\)"):
        lineage(world.platform, CRASHING.name)  # shown as INTENT, never as produced


def test_gc_with_a_zero_window_keeps_what_an_artifact_root_reaches(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(2)[1]
    used = world.build()
    run = produce_artifact(world.platform, PRODUCER, inputs={DATASET: used.ref}, parameters={}, seed=5, code=CODE)
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    head = world.build()  # the new head: only the artifact's root keeps ``used`` now
    only_used = {p.object for p in used.manifest.partitions} - {p.object for p in head.manifest.partitions}
    assert only_used, "the late reading changed a partition"
    kept = {run.manifest_hash, *run.record.files.values(), *only_used}

    def collect() -> set[str]:
        store = world.platform.store
        plan = gc.plan(world.registry, store, tables=world.tables, landing=world.zone, policy=GcPolicy(safety_window=dt.timedelta(0)))
        return set(gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables, dry_run=False, actor="test").objects_deleted)

    assert not collect() & kept
    assert all(world.platform.store.exists(d) for d in kept)
    assert locate_artifact(world.platform, run.manifest_hash).manifest_hash == run.manifest_hash
    [root] = [r for r in world.registry.list_retention_roots(dt.datetime.now(dt.UTC)) if r.ref == f"artifact:{run.manifest_hash}"]
    world.registry.release_retention_root(root.id, actor="test", reason="report withdrawn")
    assert collect() >= kept, "without its root the artifact's manifest, files and input are garbage"
