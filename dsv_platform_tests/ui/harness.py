"""The UI tests' harness: a seeded Dagster instance, the Dagster UI (``make ui``) serving it, GraphQL look-ups, the browser.

``seed`` runs the demo's first steps, small, the demo's own rehearsal step (``rehearse_once``), then the weekly full rehearsal.
``dagster_ui`` starts what ``make ui`` starts (daemon and webserver) on a free port. GraphQL only tells a test
which values to look for; every claim is asserted on what the browser rendered. Chromium is Debian's
(/usr/bin/chromium, installed by .ci/prereqs) driven by Playwright; its own browser download is not used.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAPSHOT, SPLITS, MODEL, REHEARSAL = "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits", "models/fraud_model", "reconstructability"

def shown(key: str) -> str:
    """How the catalog and an asset's page write a key: ``datasets / fraud_training_set / v6``."""
    return key.replace("/", " / ")


def node(key: str) -> str:
    """How a lineage graph labels its node: the key's last component (``v6``, ``splits``)."""
    return key.rsplit("/", 1)[-1]


def step(key: str) -> str:
    """The asset's step on a run's page: ``datasets__fraud_training_set__v6``."""
    return key.replace("/", "__")


FULL_REHEARSAL = "full_reproducibility"  # the weekly full rehearsal's asset (fully_reproduced_fraction)
CHECK_OUTCOME = {"SUCCEEDED": "Passed", "FAILED": "Failed"}  # GraphQL execution status -> the check page's "Evaluation result"
HEX64 = re.compile(r"[0-9a-f]{64}")
CHROMIUM = os.environ.get("DSV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
MISSING = f"Chromium is not installed ({CHROMIUM}): `make prereqs` (.ci/prereqs) installs it (apt-get install -y chromium)"


def seed(home: Path) -> None:
    """The first steps of `dsv demo`, small, its rehearsal and one weekly full rehearsal: a Dagster instance under home/dagster."""
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.cli.runs import Runner
    from dsv_platform.examples.fraud import events
    from dsv_platform.examples.fraud.demo import SOURCES, Demo
    from dsv_platform.examples.fraud.demo_rehearsal import rehearse_once
    from dsv_platform.settings import load_settings

    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    settings = load_settings({}).with_home(home)
    with warnings.catch_warnings(), build_platform(settings) as platform:
        warnings.simplefilter("ignore")
        runner = Runner.open(settings, platform.config)
        try:
            demo = Demo(platform, runner, days=3, rows_per_day=50, reused=False)
            demo.land([events.daily_batch(demo.domain, s, d) for s in SOURCES for d in demo.days], "month")
            demo.labels()
            demo.publish()
            # The rehearsal's blocking check fails on a dirty working tree (NOT_REPRODUCIBLE_DIRTY); the materialization
            # and the check result are recorded either way, and the UI must show whichever it is.
            # It runs the daily job and the weekly full rehearsal once each: both series get a point.
            rehearse_once(runner)
        finally:
            runner.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(proc: subprocess.Popen[bytes], base: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"dagster-webserver exited with {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
        with suppress(OSError), urllib.request.urlopen(f"{base}/server_info", timeout=5) as r:
            if r.status == 200:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"dagster-webserver did not answer /server_info within {timeout:.0f} s:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.5)


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: its code-server subprocesses die with it
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait(timeout=15)


@contextmanager
def dagster_ui(home: Path, logs: Path, timeout: float = 180.0) -> Iterator[str]:
    """`make ui` on ``home``: the daemon (runs launched from the UI are queued for it) and the webserver on a free
    port; yields the webserver's base URL. Their logs: ``logs/daemon.log``, ``logs/webserver.log``."""
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster"), "DSV_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    workspace = str(REPO / "workspace.yaml")
    logs.mkdir(parents=True, exist_ok=True)
    daemon = _start([str(BIN / "dagster-daemon"), "run", "-w", workspace], env, logs / "daemon.log")
    try:
        webserver = _start([str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w", workspace], env, logs / "webserver.log")
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_up(webserver, base, logs / "webserver.log", timeout)
            assert daemon.poll() is None, f"dagster-daemon exited:\n{(logs / 'daemon.log').read_text(errors='replace')[-4000:]}"
            yield base
        finally:
            _stop(webserver)
    finally:
        _stop(daemon)


# -- GraphQL: only to learn what to look for -----------------------------------------------------------
def graphql(base: str, query: str, **variables: Any) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    req = urllib.request.Request(f"{base}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        reply = json.load(r)
    assert not reply.get("errors"), reply
    return dict(reply["data"])


MATERIALIZATIONS = """query($key: AssetKeyInput!, $limit: Int) { assetOrError(assetKey: $key) { __typename ... on Asset {
  assetMaterializations(limit: $limit) { runId timestamp metadataEntries { label
    ... on TextMetadataEntry { text } ... on FloatMetadataEntry { floatValue } ... on IntMetadataEntry { intValue }
    ... on MarkdownMetadataEntry { mdStr } ... on JsonMetadataEntry { jsonString } ... on TableMetadataEntry { table { records } } } } } } }"""
CHECKS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename ... on AssetNode {
  assetChecksOrError { __typename ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } } } } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"""


def materializations(base: str, asset: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Newest first: run id, timestamp and metadata values of each materialization of ``asset``."""
    mats = graphql(base, MATERIALIZATIONS, key={"path": asset.split("/")}, limit=limit)["assetOrError"]["assetMaterializations"]
    return [{"run_id": m["runId"], "metadata": {e["label"]: _entry_value(e) for e in m["metadataEntries"]}} for m in mats]


def _entry_value(entry: dict[str, Any]) -> Any:
    """A metadata entry's value: text, number, markdown, JSON text, or a table's records (one dict a row)."""
    if "table" in entry:
        return [json.loads(r) for r in entry["table"]["records"]]
    return next((entry[k] for k in ("text", "floatValue", "intValue", "mdStr", "jsonString") if k in entry), None)


def latest_metadata(base: str, asset: str) -> dict[str, Any]:
    mats = materializations(base, asset, limit=1)
    assert mats, f"{asset} has no materialization on the instance"
    return dict(mats[0]["metadata"])


def check_outcomes(base: str, asset: str) -> dict[str, tuple[str, str | None]]:
    """Check name -> (status of its execution for the latest materialization, that execution's run id)."""
    checks = graphql(base, CHECKS, key={"path": asset.split("/")})["assetNodeOrError"]["assetChecksOrError"]["checks"]
    out = {}
    for c in checks:
        execution = c["executionForLatestMaterialization"] or {}
        out[c["name"]] = (execution.get("status", "NONE"), execution.get("runId"))
    return out


def run_status(base: str, run_id: str) -> str:
    return str(graphql(base, RUN, id=run_id)["runOrError"].get("status", "NOT_FOUND"))


ENDED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


def ended_status(base: str, run_id: str, timeout: float) -> str:
    """The run's status once it has ended (the page can show a step's "Success" while the run is still finishing)."""
    deadline = time.monotonic() + timeout
    while (status := run_status(base, run_id)) not in ENDED and time.monotonic() < deadline:
        time.sleep(0.5)
    return status
