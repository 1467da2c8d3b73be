"""deploy/dagster.yaml, copied unchanged and configured only by environment variables, runs the platform in production.

Dagster's run, event-log and schedule storage on a fresh database of the suite's PostgreSQL, compute logs in a
bucket of the loopback S3 server, the QueuedRunCoordinator of the yaml; ``dagster api grpc``, ``dagster-webserver``
and ``dagster-daemon run`` as real processes; the platform's registry and Iceberg catalog on PostgreSQL and its
objects in S3. Through the webserver's GraphQL: a partitioned backfill of the fraud ingest assets, the label
versions, then two publication runs queued together. Everything is checked where it landed.
Slow (about 5 minutes on 2 busy cores): each of the five runs is a new process importing the platform, and the
backfill daemon ticks every 30 s.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg2
import pytest

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs.datasets import PUBLICATION_TAG
from dsv_platform.defs.retries import PUBLICATION_POOL
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.demo import SOURCES, START
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import load_settings
from dsv_platform_tests.deploy.cluster import BIN, LOCATION, REPOSITORY, Deployment, running
from dsv_platform_tests.deploy.run_storage import instance_runs, query, why

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

DAYS = [(START + dt.timedelta(days=i)).isoformat() for i in range(3)]
INGEST = [(layer, s) for s in SOURCES for layer in ("raw", "canonical")]  # asset key paths: raw/<source>, canonical/<source>
PUBLISH = ("fraud_training_set_v5", "fraud_training_set_v6")
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}  # one process per run: a step subprocess costs seconds on a loaded machine

LAUNCH_BACKFILL = """mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on Error { message } } }"""
LAUNCH_RUN = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on Error { message } } }"""


def _drop_batches(folder: Path) -> None:
    """The daily batches of every source for DAYS, as the sources drop them (modified when recorded)."""
    folder.mkdir(parents=True)
    domain = FraudDomain(rows_per_day=40)
    for source in SOURCES:
        for day in DAYS:
            batch = events.daily_batch(domain, source, dt.date.fromisoformat(day))
            path = folder / batch.file_name
            path.write_bytes(batch.data)
            os.utime(path, (batch.recorded_at.timestamp(), batch.recorded_at.timestamp()))


def _settled(env: dict[str, str], run_ids: set[str] | None = None, tag: tuple[str, str] | None = None) -> dict[str, dict[str, Any]] | None:
    """The selected runs once every one is terminal (a failure fails the test at once), else None."""
    runs = {k: r for k, r in instance_runs(env).items() if (run_ids is None or k in run_ids) and (tag is None or r["tags"].get(tag[0]) == tag[1])}
    failed = {k: r["job"] for k, r in runs.items() if r["status"] in {"FAILURE", "CANCELED"}}
    assert not failed, f"runs failed: {failed}\n" + "\n".join(why(env, k) for k in failed)
    if not runs or any(r["status"] not in TERMINAL for r in runs.values()):
        return None
    return runs


def _materialized(env: dict[str, str]) -> set[tuple[tuple[str, ...], str | None]]:
    rows = query(env, "SELECT DISTINCT asset_key, partition FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
    return {(tuple(json.loads(key)), partition) for key, partition in rows}


def _launch(cluster: Deployment, job: str, *, assets: list[str] | None = None, tags: dict[str, str] | None = None) -> str:
    selector: dict[str, Any] = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": job}
    if assets:
        selector["assetSelection"] = [{"path": a.split("/")} for a in assets]
    meta = {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}
    out = cluster.graphql(LAUNCH_RUN, p={"selector": selector, "runConfigData": IN_PROCESS, "executionMetadata": meta})["launchRun"]
    assert out["__typename"] == "LaunchRunSuccess", out
    return str(out["run"]["runId"])


LOADED = """import json, dagster as dg
with dg.DagsterInstance.get() as i:
    q = i.run_coordinator.get_run_queue_config()
    pool = i.event_log_storage.get_concurrency_info("%s").slot_count
    print(json.dumps([type(i.run_coordinator).__name__, type(i.compute_log_manager).__name__, q.max_concurrent_runs, q.tag_concurrency_limits, pool]))"""
LOADED = LOADED % PUBLICATION_POOL


def _dsv(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run([str(BIN / "dsv"), *args], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _iceberg_snapshots(env: dict[str, str], s3: Any) -> dict[str, set[str]]:
    """Snapshot ids per table, read from the SQL catalog's rows in PostgreSQL and the table metadata files in S3."""
    url = urlsplit(env["DSV_ICEBERG_CATALOG_URL"])
    dsn = f"host={url.hostname} port={url.port} user={url.username} dbname={url.path.lstrip('/')}"
    with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT table_name, metadata_location FROM iceberg_tables")
        rows = cur.fetchall()
    conn.close()
    found = {}
    for table, location in rows:
        bucket, key = location.removeprefix("s3://").split("/", 1)
        metadata = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        found[table] = {str(snap["snapshot-id"]) for snap in metadata.get("snapshots", [])}
    return found


def _check_instance(env: dict[str, str]) -> None:
    """``dagster instance info`` succeeds on PostgreSQL; the lazily loaded run coordinator and compute log manager are the yaml's;
    the publication pool gets its limit as deploy/README says (``dagster instance concurrency set``)."""
    out = subprocess.run([str(BIN / "dagster"), "instance", "info"], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"):
        assert name in out.stdout, f"{name} not in:\n{out.stdout}"
    pool = subprocess.run([str(BIN / "dagster"), "instance", "concurrency", "set", PUBLICATION_POOL, "1"], env=env, capture_output=True, text=True, timeout=180)
    assert pool.returncode == 0, pool.stderr[-3000:]
    out = subprocess.run([str(BIN / "python"), "-c", LOADED], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    limit = [{"key": PUBLICATION_TAG, "limit": 1}]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["QueuedRunCoordinator", "S3ComputeLogManager", 8, limit, 1], out.stdout


def _run_everything(cluster: Deployment, env: dict[str, str]) -> tuple[set[str], set[str]]:
    """The ingest backfill, the two label versions, then both publication runs queued at once; their run ids."""
    params = {"partitionNames": DAYS, "assetSelection": [{"path": list(a)} for a in INGEST], "title": "fraud ingest", "runConfigData": IN_PROCESS}
    backfill = cluster.graphql(LAUNCH_BACKFILL, p=params)["launchPartitionBackfill"]
    assert backfill["__typename"] == "LaunchBackfillSuccess", backfill
    wanted, t0 = {(a, d) for a in INGEST for d in DAYS}, time.monotonic()
    cluster.wait_for("the ingest backfill", lambda: wanted <= _materialized(env) and _settled(env, tag=("dagster/backfill", backfill["backfillId"])), 420, 2)
    t1 = time.monotonic()
    labels = {_launch(cluster, "__ASSET_JOB", assets=["labels/fraud"], tags={"dagster/partition": v}) for v in ("v5", "v6")}
    cluster.wait_for("the label runs", lambda: _settled(env, labels), 300, 2)
    t2 = time.monotonic()
    publications = {_launch(cluster, f"publish_{p}") for p in PUBLISH}
    cluster.wait_for("the publication runs", lambda: _settled(env, publications), 420, 2)
    print(f"ingest backfill {t1 - t0:.0f} s, labels {t2 - t1:.0f} s, publications {time.monotonic() - t2:.0f} s")
    return labels, publications


def test_production_instance_runs_backfill_and_publications(tmp_path: Path, production_env: dict[str, str], s3_env: Any) -> None:
    env = production_env
    _drop_batches(Path(env["DSV_DROP_FOLDER"]))
    _check_instance(env)
    t0 = time.monotonic()
    with running(tmp_path, env) as cluster:
        started = time.monotonic()
        labels, publications = _run_everything(cluster, env)
        daemons = cluster.graphql("{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }")
    print(f"deployment up in {started - t0:.1f} s; backfill, labels and publications in {time.monotonic() - started:.1f} s")
    assert all(d["healthy"] for d in daemons["instance"]["daemonHealth"]["allDaemonStatuses"]), daemons

    # Every run is in the instance's PostgreSQL database, through the queue, and succeeded.
    runs = instance_runs(env)
    assert labels | publications <= set(runs)
    assert {r["status"] for r in runs.values()} == {"SUCCESS"}, {k: (r["job"], r["status"]) for k, r in runs.items()}
    assert any("dagster/backfill" in r["tags"] for r in runs.values())
    assert {(a, d) for a in INGEST for d in DAYS} <= _materialized(env)
    assert all(r["queued"] is not None and r["launched"] is not None for r in runs.values()), "a run bypassed the QueuedRunCoordinator"

    # Untagged runs queued together are launched together (the label runs) ...
    first, second = sorted((runs[r] for r in labels), key=lambda r: r["launched"])
    assert second["launched"] < first["end"], f"the queue did not launch the label runs concurrently: {first} / {second}"
    # ... but the publication runs carry the tag and the daemon launched the second only after the first had ended.
    pubs = sorted((runs[r] for r in publications), key=lambda r: r["launched"])
    assert len(pubs) == len(PUBLISH) and all(r["tags"].get(PUBLICATION_TAG) for r in pubs), pubs
    assert not any(PUBLICATION_TAG in runs[r]["tags"] for r in labels)
    for first, second in itertools.pairwise(pubs):
        assert second["queued"] < first["end"], "the second publication run was not waiting in the queue"
        assert second["launched"] >= first["end"] and second["start"] >= first["end"], f"publication runs overlapped: {first} / {second}"

    # Compute logs are objects in the log bucket, for every run.
    client = s3_env.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=env["DSV_COMPUTE_LOG_BUCKET"]) for o in page.get("Contents", [])]
    assert keys and all(k.startswith("dagster-compute-logs/") for k in keys), keys[:5]
    assert {r for r in runs if any(r in k for k in keys)} == set(runs), keys

    # The registry on PostgreSQL holds both PUBLISHED realizations, `dsv verify` (the same environment) re-hashes them
    # from S3, and every snapshot their manifests pin is a snapshot of a canonical table in the Iceberg catalog on PostgreSQL.
    registry = Registry.from_url(load_settings(env).registry_url)
    published = [r for r in registry.versions("fraud_training_set") if r.state is RealizationState.PUBLISHED]
    assert {r.version for r in published} == {"v5", "v6"}, published
    snapshots = _iceberg_snapshots(env, s3_env.client())
    assert set(SOURCES) <= {t.removeprefix("canonical_") for t in snapshots}, snapshots
    for realization in published:
        verified = _dsv(env, "verify", realization.ref, "--json")
        assert verified["ok"] and verified["content_hash"] == realization.content_hash, verified
        pins = json.loads(registry.get_manifest(str(realization.manifest_hash)))["sources"]
        assert pins and {p["snapshot_id"] for p in pins} <= {i for ids in snapshots.values() for i in ids}, (pins, snapshots)
