"""Issue 26 item 6: ``dsv ingest --submit`` and ``dsv build --submit`` send their runs to the production instance.

deploy/dagster.yaml on PostgreSQL and the loopback S3 (the ``production_env`` of deploy/conftest.py), the code server,
webserver and daemon as real processes (cluster.py); ``dsv`` as a subprocess of a workstation's environment with
``DSV_DAGSTER_URL`` naming the webserver. The ingests of a day run concurrently through the queue; two builds of a
dataset submitted at once publish one realization, the second run waiting in the queue for the first. Each run is in
the instance's run storage, queued and dequeued by the daemon (never run in the CLI's process), and the CLI printed
the run's progress and the in-process command's summary. A run that fails is the in-process command's typed exit
code naming the run; Ctrl-C leaves the run running (DETACHED); an unreachable webserver is one line
(SERVICE_UNREACHABLE) without its password. The configuration is the fraud example's with the in_process executor
(platform.yaml ``executor``): one process per run, as the production instance test runs.
Slow (about 3 minutes on 2 busy cores).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.webserver.graphql import Webserver
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs.datasets import PUBLICATION_TAG
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.demo import SOURCES, START
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.trust.launch import LAUNCH_TAG, PARTITION_TAG
from dsv_platform.settings import DEFAULT_CONFIG_DIR, load_settings
from dsv_platform_tests.deploy.cluster import BIN, Deployment, free_port, running
from dsv_platform_tests.deploy.run_storage import instance_runs, why

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]

ROWS_PER_DAY = 160  # one day clears fraud_training_set:v6's rows_at_least gate (100) after its population filter
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
RUN_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def _in_process_config(tmp_path: Path) -> Path:
    """The fraud example's configuration with the in_process executor (a step subprocess costs seconds on a loaded machine)."""
    folder = tmp_path / "config"
    shutil.copytree(DEFAULT_CONFIG_DIR, folder)
    with (folder / "platform.yaml").open("a", encoding="utf-8") as f:
        f.write("executor: in_process\n")
    return folder


def _batches(folder: Path) -> dict[str, Path]:
    """One day's batch of every source with rows on the first day (no chargeback yet), in a folder the run workers see (this machine)."""
    folder.mkdir(parents=True)
    domain, found = FraudDomain(rows_per_day=ROWS_PER_DAY), {}
    for source in SOURCES:
        batch = events.daily_batch(domain, source, START)
        if batch.data.count(b"\n") < 2:  # a header only
            continue
        found[source] = folder / batch.file_name
        found[source].write_bytes(batch.data)
    return found


def _dsv(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(BIN / "dsv"), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def _run_id(text: str, pattern: str) -> str:
    found = re.search(pattern.replace("RUN", f"({RUN_ID})"), text)
    assert found, f"{pattern!r} not in:\n{text}"
    return found.group(1)


def _followed(err: str, run_id: str) -> None:
    """The progress lines of a run followed from the queue to its end."""
    for state in ("queued", "starting", "started", "succeeded"):  # starting: the daemon dequeued it and the run launcher starts it
        assert f"dsv: run {run_id} {state}\n" in err, f"no {state!r} line for {run_id} in:\n{err}"


def _settle(cluster: Deployment, env: dict[str, str], run_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        run = instance_runs(env).get(run_id)
        return run if run is not None and run["status"] in TERMINAL else None

    return dict(cluster.wait_for(f"run {run_id}", ended, 300, 2))


def _ingest_a_day(env: dict[str, str], batches: dict[str, Path]) -> dict[str, str]:
    """The sources' ingests at once (the queue takes them together); their run ids."""
    procs = {s: _dsv(env, "ingest", s, str(f), "--submit", *(["--json"] if s == "transactions" else [])) for s, f in batches.items()}
    ids = {}
    for source, proc in procs.items():
        code, out, err = _done(proc)
        assert code == 0, err[-3000:]
        if source == "transactions":
            doc = json.loads(out)
            ids[source] = doc["run_id"]
            assert (doc["first_day"], doc["last_day"], doc["files"][0]["rows_accepted"]) == (START.isoformat(), START.isoformat(), ROWS_PER_DAY), doc
        else:
            ids[source] = _run_id(out, rf"ingested 1 file\(s\) of {source} in run RUN \(raw/{source}, canonical/{source} over ")
            assert f"  check raw/{source}.batch_is_readable: passed" in out, out
        _followed(err, ids[source])
        assert f"dsv: {source}: landing: 1/1 files" in err and f"dsv: materialized canonical/{source}" in err, err
    return ids


def _labels(cluster: Deployment, env: dict[str, str]) -> None:
    """The v6 label version, launched as the UI would (the build pins its table)."""
    run_id = Webserver(cluster.base).launch_run("__ASSET_JOB", tags={PARTITION_TAG: "v6"}, assets=[["labels", "fraud"]])
    run = _settle(cluster, env, run_id)
    assert run["status"] == "SUCCESS", why(env, run_id)


def _interrupted(env: dict[str, str]) -> tuple[int, str]:
    """``dsv build --submit`` interrupted (SIGINT, as Ctrl-C) once its run is queued; exit code and stderr."""
    proc = _dsv(env, "build", "fraud_training_set:v5", "--submit")
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if " queued" in line or not line:
            break
    proc.send_signal(signal.SIGINT)
    code, _, rest = _done(proc)
    return code, "".join(lines) + rest


def test_submit_ingests_and_builds_on_the_production_instance(tmp_path: Path, production_env: dict[str, str]) -> None:
    env = production_env | {"DSV_CONFIG_DIR": str(_in_process_config(tmp_path))}
    batches = _batches(tmp_path / "batches")
    assert {"transactions", "account_features"} <= set(batches), batches

    # No webserver there: one line, the password masked, SERVICE_UNREACHABLE; nothing ran.
    code, out, err = _done(_dsv(env, "build", "fraud_training_set:v6", "--submit", f"http://ops:hunter2@127.0.0.1:{free_port()}"))
    assert code == FailureKind.SERVICE_UNREACHABLE.exit_code, err
    assert err.count("\n") == 1 and err.startswith("dsv: error: Dagster webserver http://ops:***@127.0.0.1:") and "hunter2" not in err + out, err

    t0 = time.monotonic()
    with running(tmp_path, env) as cluster:
        cli = env | {"DSV_DAGSTER_URL": cluster.base}
        t1 = time.monotonic()
        ingests = _ingest_a_day(cli, batches)
        t2 = time.monotonic()
        _labels(cluster, env)

        # Two builds at once: the queue admits one publication run at a time (the second reuses the first's realization).
        summaries, builds, published_here = [], [], []
        for code, out, err in [_done(p) for p in [_dsv(cli, "build", "fraud_training_set:v6", "--submit") for _ in range(2)]]:
            assert code == 0, err[-3000:]
            builds.append(_run_id(out, r"built fraud_training_set:v6 in run RUN\n"))
            _followed(err, builds[-1])
            assert "dsv: datasets__fraud_training_set__v6: done" in err, err
            published_here.append("dsv: fraud_training_set:v6: publish: " in err)  # the other reused it (pin, no publish stage)
            summaries.append(dict(re.findall(r"^  (ref|manifest_hash|content_hash|rows) +(\S+)", out, re.M)))
            assert re.search(r"^  check datasets/fraud_training_set/v6/splits\.\w+: passed$", out, re.M), out
        summary = summaries[0]
        assert sorted(published_here) == [False, True], published_here
        assert summaries[1] == summary and summary["ref"].startswith("fraud_training_set:v6@") and int(summary["rows"]) >= 100, summaries
        t3 = time.monotonic()

        # A run that fails: the in-process command's typed exit code (FAILED: no v5 labels), naming the run.
        code, out, err = _done(_dsv(cli, "build", "fraud_training_set:v5", "--submit"))
        failed = _run_id(err, r"dsv: error: run RUN failed: datasets__fraud_training_set__v5: ")
        assert code == FailureKind.FAILED.exit_code and "labels_fraud_v5 has no snapshot yet" in err.splitlines()[-1], err
        assert f"{cluster.base}/runs/{failed}" in err.splitlines()[-1] and out == "", err

        # Ctrl-C: the command stops following (DETACHED, naming the run), the run goes on to its end on the instance.
        code, err = _interrupted(cli)
        detached = _run_id(err, r"dsv: error: stopped following run RUN; the run goes on on the instance: ")
        assert code == FailureKind.DETACHED.exit_code, err
        assert _settle(cluster, env, detached)["status"] == "FAILURE"  # it ran (v5 has no labels), after the CLI had gone
        print(f"deployment up in {t1 - t0:.0f} s; ingests {t2 - t1:.0f} s; labels and build {t3 - t2:.0f} s; failures {time.monotonic() - t3:.0f} s")

    # Every submitted run is in the instance's run storage, queued (QueuedRunCoordinator) and dequeued by the daemon.
    runs = instance_runs(env)
    for run_id in [*ingests.values(), *builds]:
        run = runs[run_id]
        assert run["status"] == "SUCCESS" and run["queued"] is not None and run["launched"] is not None, (run, why(env, run_id))
    assert runs[failed]["status"] == "FAILURE" and runs[failed]["queued"] is not None
    assert all(runs[i]["job"] == "__ASSET_JOB" and runs[i]["tags"][PARTITION_TAG] == START.isoformat() for i in ingests.values())
    first, second = sorted(builds, key=lambda r: runs[r]["launched"])
    for build in builds:
        publication = runs[build]
        assert publication["job"] == "publish_fraud_training_set_v6" and publication["tags"][PUBLICATION_TAG] == "fraud_training_set:v6", publication
        assert LAUNCH_TAG in publication["tags"]
    assert runs[second]["queued"] < runs[first]["end"] <= runs[second]["launched"], "the second publication run did not wait in the queue"

    # The registry on PostgreSQL holds the realization PUBLISHED; its builder is the CLI's signed launch request of that run.
    registry = Registry.from_url(load_settings(env).registry_url)
    [published] = [r for r in registry.versions("fraud_training_set") if r.state is RealizationState.PUBLISHED]
    assert (published.ref, published.version, str(published.manifest_hash)) == (summary["ref"], "v6", summary["manifest_hash"]), (published, summary)
    verify = subprocess.run([str(BIN / "dsv"), "verify", published.ref, "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert verify.returncode == 0, verify.stderr[-3000:]
    launch = json.loads(verify.stdout)["launch"]
    assert launch["run_id"] == first and launch["verified"], launch
