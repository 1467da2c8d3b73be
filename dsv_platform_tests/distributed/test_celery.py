"""The fraud example's ingest backfill and dataset build on the Dagster Celery executor, with two real workers (issue 12).

A copy of the fraud configuration selects ``executor: celery`` in its ``platform.yaml`` (the definitions are
unchanged); Redis (the suite's own server) is broker and result backend; the platform state the workers share is
the production set: registry and Iceberg SQL catalog on PostgreSQL, objects and warehouse on the loopback S3 server.
The runs are launched with the ``dagster`` CLI as an operator would; the steps must run in the worker processes
(pids in the event log whose parent is a worker, and the worker name Dagster records), on both workers, and the
realization must have the same content identity as an in-process build of the same batches in a second home.
With `fan_out: 3` the build's prepare steps must run on both workers, its content identity that of a single-step build.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import psutil
import pytest

from dsv_platform import open_dataset
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import CONFIG_DIR, events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags
from dsv_platform_tests.distributed.celery_workers import Worker, celery_workers, write_config
from dsv_platform_tests.fixtures.production_stores import production_stores

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DAYS = ["2026-06-01", "2026-06-02", "2026-06-03"]
ROWS_PER_DAY = 120
INGEST = "group:raw or group:canonical"
DATASET = "fraud_training_set_v6"  # the publication job is publish_<DATASET>; the asset keys:
SNAPSHOT, SPLITS = "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits"
CONTENT_KEYS = ("format", "encoding", "dataset", "version", "contract", "schema_hash", "content_hash", "rows", "partitions", "splits", "labels")


@pytest.fixture
def world(tmp_path, postgres_server, s3_env, redis_server) -> dict[str, str]:
    """The environment of every process of the Celery deployment: stores, configuration, Dagster instance, broker."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    with (config / "platform.yaml").open("a") as f:
        f.write("executor: celery  # every job's steps go to the Celery workers\n")
    domain = FraudDomain(rows_per_day=ROWS_PER_DAY)
    drop(tmp_path / "drop", [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    celery_conf = write_config(tmp_path / "celery", redis_server.url(0), redis_server.url(1))
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_", "PYTHONPATH"))}
    return inherited | production_stores(postgres_server, s3_env) | {
        "DSV_HOME": str(tmp_path / "dsv"),
        "DSV_CONFIG_DIR": str(config),
        "DSV_DROP_FOLDER": str(tmp_path / "drop"),
        "DSV_ACTOR": "celery-test",
        "DSV_CELERY_BROKER_URL": redis_server.url(0),
        "DSV_CELERY_BACKEND_URL": redis_server.url(1),
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONPATH": os.pathsep.join([str(celery_conf), str(ROOT)]),
    } | s3_env.env()


def dagster_cli(env: dict[str, str], *args: str) -> None:
    cmd = [sys.executable, "-m", "dagster", *args, "-m", "dsv_platform.definitions", "-a", "defs"]
    out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-5000:])


def step_placement(instance: dg.DagsterInstance, run_id: str, workers: list[Worker]) -> dict[str, tuple[str, str, float, float]]:
    """step key -> (worker whose process ran it, from the step pid's parent; worker name Dagster recorded for it; start; end)."""
    by_pid = {w.pid: w.name for w in workers}
    run_pid, placed, named, start, end = None, {}, {}, {}, {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type_value == "RUN_START":
            run_pid = event.pid
        elif event.event_type_value == "STEP_START":
            assert event.pid != run_pid, f"step {event.step_key} ran in the run's own process"
            placed[event.step_key] = by_pid.get(psutil.Process(event.pid).ppid(), f"not a worker: pid {event.pid}")
            start[event.step_key] = entry.timestamp
        elif event.event_type_value == "STEP_SUCCESS":
            end[event.step_key] = entry.timestamp
        elif event.event_type_value == "ENGINE_EVENT" and "Celery worker" in (event.engine_event_data.metadata or {}):
            named[event.step_key] = event.engine_event_data.metadata["Celery worker"].value
    assert placed and placed.keys() == named.keys() == end.keys(), (placed, named, end)
    return {k: (placed[k], named[k], start[k], end[k]) for k in placed}


def run_on_celery(env: dict[str, str], folder: Path) -> tuple[dict[str, tuple[str, str, float, float]], dict[str, dict[str, object]]]:
    """The three runs through the CLI with two workers: step placement per run, and the latest metadata per asset."""
    with celery_workers(2, env, folder / "workers") as workers:
        dagster_cli(env, "asset", "materialize", "--select", INGEST, "--partition-range", f"{DAYS[0]}...{DAYS[-1]}")  # the backfill
        dagster_cli(env, "asset", "materialize", "--select", "labels/fraud", "--partition", "v6")
        dagster_cli(env, "job", "execute", "-j", f"publish_{DATASET}")  # snapshot and splits, tagged dsv/publication
        with dg.DagsterInstance.local_temp(env["DAGSTER_HOME"]) as instance:
            runs = instance.get_runs()
            assert len(runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
            assert [r.tags.get("dsv/publication") for r in runs].count("fraud_training_set:v6") == 1
            placement = {f"{r.run_id[:8]}:{k}": v for r in runs for k, v in step_placement(instance, r.run_id, workers).items()}
            return placement, latest_metadata(instance)


def latest_metadata(instance: dg.DagsterInstance) -> dict[str, dict[str, object]]:
    found = {}
    for key in instance.get_asset_keys():
        event = instance.get_latest_materialization_event(key)
        if event is not None and event.asset_materialization is not None:
            found[key.to_user_string()] = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    return found


def run_in_process(env: dict[str, str], home: Path) -> tuple[dict[str, dict[str, object]], Settings]:
    """The same batches and configuration in a second, embedded home, every step in this process."""
    settings = load_settings({"DSV_HOME": str(home), "DSV_CONFIG_DIR": env["DSV_CONFIG_DIR"], "DSV_DROP_FOLDER": env["DSV_DROP_FOLDER"]})
    defs = build_defs(settings)
    assets = [*defs.assets]
    with dg.DagsterInstance.ephemeral() as instance:
        for selection, partition, tags in (
            (INGEST, None, range_tags(DAYS[0], DAYS[-1])),
            ("labels/fraud", "v6", {}),
            ([SNAPSHOT, SPLITS], None, {}),
        ):
            result = dg.materialize(assets, selection=selection, partition_key=partition, tags=tags, instance=instance, resources=defs.resources)
            assert result.success
        return latest_metadata(instance), settings


def content_document(ref: str, settings: Settings) -> dict[str, object]:
    ds = open_dataset(ref, settings=settings)
    assert ds.verify_content() == ds.content_hash
    doc = ds.manifest.to_document()
    return {k: doc[k] for k in CONTENT_KEYS}


def test_backfill_and_build_on_two_celery_workers_match_an_in_process_run(world, tmp_path):
    placement, celery = run_on_celery(world, tmp_path)
    workers_used = {worker for worker, *_ in placement.values()}
    assert all(worker == named for worker, named, *_ in placement.values()), placement  # pid lineage agrees with Dagster's record
    assert len(workers_used) == 2 and not any(w.startswith("not a worker") for w in workers_used), placement
    steps = {k.split(":", 1)[1] for k in placement}
    ingest = [v for k, v in placement.items() if ":raw__" in k or ":canonical__" in k]  # step keys: raw__<source>, canonical__<source>
    overlapping = [(a, b) for a in ingest for b in ingest if a[0] < b[0] and a[2] < b[3] and b[2] < a[3]]
    assert overlapping, ingest  # the backfill's steps ran at the same time on the two workers
    assert {f"raw__{s}" for s in FRAUD_SOURCES} | {f"canonical__{s}" for s in FRAUD_SOURCES} | {"labels__fraud", "datasets__fraud_training_set__v6"} <= steps

    local, local_settings = run_in_process(world, tmp_path / "in-process")
    for source in FRAUD_SOURCES:
        assert celery[f"raw/{source}"]["partition_version"] == local[f"raw/{source}"]["partition_version"]
        assert celery[f"canonical/{source}"]["content_hash"] == local[f"canonical/{source}"]["content_hash"]
    assert celery["labels/fraud"]["content_hash"] == local["labels/fraud"]["content_hash"]
    snap, local_snap = celery[SNAPSHOT], local[SNAPSHOT]
    assert snap["content_hash"] == local_snap["content_hash"] and snap["split_counts"] == local_snap["split_counts"]
    assert celery[SPLITS]["assignment_hash"] == local[SPLITS]["assignment_hash"]
    # The whole content identity of the manifest agrees; only the pins (snapshot ids), code/environment and attachments are per store.
    shared = content_document(str(snap["ref"]), load_settings(world))
    assert shared == content_document(str(local_snap["ref"]), local_settings)
    assert [p["key"] for p in shared["partitions"]] == [f"event_date={d}" for d in DAYS] and shared["rows"] == snap["rows"]
    print(json.dumps({"steps": {k: [w, round(e - s, 2)] for k, (w, _, s, e) in sorted(placement.items())}, "overlapping": len(overlapping)}, indent=1))


def test_a_fanned_out_build_prepares_on_both_celery_workers_and_equals_the_single_step_build(world, tmp_path):
    with (Path(world["DSV_CONFIG_DIR"]) / "datasets" / f"{DATASET}.yaml").open("a") as f:
        f.write("fan_out: 3\n")  # three prepare steps over the three days
    placement, celery = run_on_celery(world, tmp_path)
    prepares = {k: worker for k, (worker, named, *_) in placement.items() if "_prepare[" in k}
    assert len(prepares) == 3 and set(prepares.values()) == set(w for w, *_ in placement.values()), placement
    assert len(set(prepares.values())) == 2, prepares  # the prepare steps ran on both workers

    single_config = tmp_path / "single-step-config"
    shutil.copytree(CONFIG_DIR, single_config)  # the same definition without fan_out: one build step
    local, local_settings = run_in_process(world | {"DSV_CONFIG_DIR": str(single_config)}, tmp_path / "in-process")
    snap, local_snap = celery[SNAPSHOT], local[SNAPSHOT]
    assert snap["content_hash"] == local_snap["content_hash"] and snap["partitions"] == local_snap["partitions"]
    assert content_document(str(snap["ref"]), load_settings(world)) == content_document(str(local_snap["ref"]), local_settings)
