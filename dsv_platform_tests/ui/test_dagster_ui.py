"""The Dagster UI, in a real browser, shows the platform's asset graph, its checks and its materialization metadata.

A small fraud world is materialized on a fresh instance under ``tmp_path`` (the demo's first steps: land and load
three days, both label versions, publish fraud_training_set:v5/:v6 with their splits, train fraud_model, then run the
``reconstructability`` rehearsal). ``dagster-webserver -w workspace.yaml`` serves that instance on a free port and
headless Chromium, driven over the DevTools protocol (``cdp.py``), opens the pages. GraphQL is used only to learn
the exact values to look for (hashes, the fraction, check outcomes); every claim is asserted on the text the browser
rendered. Screenshots are written to ``tmp_path/screenshots``.

Chromium is a system package: ``.ci/run`` installs it. Without it this test fails (never skips).
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

import pytest

from dsv_platform_tests.ui.cdp import MISSING, Browser, find_chromium

pytestmark = pytest.mark.ui

REPO = Path(__file__).resolve().parents[2]
WEBSERVER = Path(sys.executable).with_name("dagster-webserver")
SNAPSHOT, SPLITS, REHEARSAL = "fraud_training_set_v6_snapshot", "fraud_training_set_v6_splits", "reconstructability"
GROUPS = ("raw", "canonical", "labels", "datasets", "models", "reproducibility")
ASSETS = (
    "raw_transactions",
    "canonical_transactions",
    "labels_fraud",
    "fraud_training_set_v5_snapshot",
    SNAPSHOT,
    SPLITS,
    "fraud_model",
    REHEARSAL,
    "realization_integrity",
)
CHECK_OUTCOME = {"SUCCEEDED": "Passed", "FAILED": "Failed"}  # GraphQL execution status -> the check page's "Evaluation result"
HEX64 = re.compile(r"[0-9a-f]{64}")


# -- the instance ------------------------------------------------------------------------------------
def _seed(home: Path) -> None:
    """The first steps of `dsv demo`, small: a Dagster instance under home/dagster with every asset of the claim materialized."""
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.cli.runs import Runner
    from dsv_platform.examples.fraud import events
    from dsv_platform.examples.fraud.demo import SOURCES, Demo
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
            runner.run([REHEARSAL], check=False)
        finally:
            runner.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _webserver(home: Path, log: Path, timeout: float = 90.0) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster"), "DSV_HOME": str(home), "DAGSTER_DISABLE_TELEMETRY": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(WEBSERVER), "-h", "127.0.0.1", "-p", str(port), "-w", str(REPO / "workspace.yaml")],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the code-location subprocess dies with it
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dagster-webserver exited with {proc.returncode}:\n{log.read_text(errors='replace')[-4000:]}")
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"dagster-webserver did not answer /server_info within {timeout:.0f} s:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.5)
        yield base
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, 15)
                proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, 9)
                proc.wait(timeout=15)


# -- GraphQL: only to learn what to look for -----------------------------------------------------------
def _graphql(base: str, query: str, **variables: Any) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    req = urllib.request.Request(f"{base}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        reply = json.load(r)
    assert not reply.get("errors"), reply
    return dict(reply["data"])


LATEST_METADATA = """query($key: AssetKeyInput!) { assetOrError(assetKey: $key) { __typename ... on Asset {
  assetMaterializations(limit: 1) { metadataEntries { label
    ... on TextMetadataEntry { text } ... on FloatMetadataEntry { floatValue } ... on IntMetadataEntry { intValue } } } } } }"""
CHECKS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename ... on AssetNode {
  assetChecksOrError { __typename ... on AssetChecks { checks { name executionForLatestMaterialization { status } } } } } } }"""


def _latest_metadata(base: str, asset: str) -> dict[str, Any]:
    mats = _graphql(base, LATEST_METADATA, key={"path": [asset]})["assetOrError"]["assetMaterializations"]
    assert mats, f"{asset} has no materialization on the instance"
    return {e["label"]: next((e[k] for k in ("text", "floatValue", "intValue") if k in e), None) for e in mats[0]["metadataEntries"]}


def _check_outcomes(base: str, asset: str) -> dict[str, str]:
    checks = _graphql(base, CHECKS, key={"path": [asset]})["assetNodeOrError"]["assetChecksOrError"]["checks"]
    return {c["name"]: (c["executionForLatestMaterialization"] or {}).get("status", "NONE") for c in checks}


# -- the browser ---------------------------------------------------------------------------------------
class Pages:
    """Navigate, wait (bounded) for the expected text, screenshot; a failed wait leaves a FAILED- screenshot."""

    def __init__(self, browser: Browser, base: str, shots: Path) -> None:
        self.browser, self.base, self.shots = browser, base, shots
        self.taken: list[Path] = []

    def open(self, path: str, *needles: str, shot: str, timeout: float = 45.0) -> str:
        self.browser.navigate(self.base + path)
        return self.wait(*needles, shot=shot, timeout=timeout)

    def wait(self, *needles: str, shot: str, timeout: float = 45.0, settle: float = 0.5) -> str:
        try:
            self.browser.wait_for_text(*needles, timeout=timeout)
        except AssertionError:
            self.browser.screenshot(self.shots / f"FAILED-{shot}.png")
            raise
        time.sleep(settle)  # let the layout, fonts and status colours settle before the picture
        self.taken.append(self.browser.screenshot(self.shots / f"{shot}.png"))
        return self.browser.text()


def _fraction_shown(text: str) -> float:
    """The value next to reconstructable_fraction in the metadata table (Key / Timestamp / Value)."""
    m = re.search(r"reconstructable_fraction\s+(?:[A-Z][a-z]{2} \d{1,2}, \d{1,2}:\d{2} [AP]M\s+)?(-?[0-9]+(?:\.[0-9]+)?)\b", text)
    assert m, f"no reconstructable_fraction value rendered:\n{text[:3000]}"
    return float(m[1])


def test_dagster_ui_shows_asset_graph_checks_and_materialization_metadata(tmp_path: Path) -> None:
    chromium = find_chromium()
    if chromium is None:
        pytest.fail(MISSING, pytrace=False)
    home, shots = tmp_path / "home", tmp_path / "screenshots"
    shots.mkdir()
    _seed(home)

    with _webserver(home, tmp_path / "webserver.log") as base:
        snapshot = _latest_metadata(base, SNAPSHOT)
        rehearsal = _latest_metadata(base, REHEARSAL)
        split_checks = _check_outcomes(base, SPLITS)
        rehearsal_checks = _check_outcomes(base, REHEARSAL)
        for key in ("manifest_hash", "content_hash"):
            assert HEX64.fullmatch(str(snapshot.get(key))), f"{SNAPSHOT} {key}: {snapshot.get(key)!r}"
        assert isinstance(rehearsal.get("reconstructable_fraction"), float), rehearsal
        assert split_checks and set(split_checks.values()) <= set(CHECK_OUTCOME), split_checks
        assert set(rehearsal_checks) == {"retained_models_are_reconstructable"} and set(rehearsal_checks.values()) <= set(CHECK_OUTCOME), rehearsal_checks

        browser = Browser(chromium, width=1600, height=1000)
        try:
            pages = Pages(browser, base, shots)
            # Same-origin page first, to pre-dismiss the community pop-up (it would cover the graph).
            browser.navigate(f"{base}/server_info")
            browser.wait_for_text("dagster_webserver_version", timeout=15)
            browser.evaluate("localStorage.setItem('communityNux', JSON.stringify('1'))")

            # 1. Global asset lineage: every group, then (Alt+E: expand all groups) the asset nodes and their edges.
            pages.open("/asset-groups", "Global asset lineage", *GROUPS, shot="01-lineage-groups")
            deadline = time.monotonic() + 30
            while "raw_transactions" not in browser.text() and time.monotonic() < deadline:
                browser.press("e", "KeyE", 69, alt=True)
                time.sleep(1.5)
            expanded = str(browser.evaluate("location.href"))
            browser.resize(2200, 1900)  # room for the whole expanded graph
            browser.navigate(expanded)  # re-open so the expanded graph is laid out for this viewport
            # At this size the nodes are drawn in detail: full names, "Asset checks", latest event.
            pages.wait(*ASSETS, "Asset checks", shot="02-lineage-expanded", settle=2.5)
            assert "expanded=" in expanded, expanded

            # 2. The catalog lists every asset by its full name (tall viewport: the list is virtualized).
            browser.resize(1600, 3000)
            pages.open("/assets", *ASSETS, shot="03-catalog")
            browser.resize(1600, 1000)

            # 3. The dataset snapshot: its latest materialization's manifest and content hashes, and its lineage.
            text = pages.open(
                f"/assets/{SNAPSHOT}",
                "manifest_hash",
                snapshot["manifest_hash"],
                "content_hash",
                snapshot["content_hash"],
                str(snapshot["ref"]),
                "canonical_transactions",
                "labels_fraud",
                SPLITS,
                "fraud_model",
                shot="04-snapshot-overview",
            )
            assert re.search(rf"manifest_hash\s+(?:\S.*\n\s*)?{snapshot['manifest_hash']}", text), text[:3000]
            pages.open(
                f"/assets/{SNAPSHOT}?view=events",
                "Materialized in run",
                "manifest_hash",
                snapshot["manifest_hash"],
                snapshot["content_hash"],
                shot="05-snapshot-events",
            )

            # 4. The splits' entity-disjointness check and its outcome.
            for name, status in split_checks.items():
                text = pages.open(f"/assets/{SPLITS}?view=checks", name, "Evaluation result", shot="06-splits-checks")
                assert re.search(rf"Evaluation result\s+{CHECK_OUTCOME[status]}\b", text), (name, status, text[:3000])

            # 5. reconstructability: the fraction in its metadata, and its check with the outcome the instance recorded.
            text = pages.open(f"/assets/{REHEARSAL}", "reconstructable_fraction", "retained_models", "rehearsed", shot="07-reconstructability")
            assert _fraction_shown(text) == pytest.approx(rehearsal["reconstructable_fraction"]), (rehearsal, text[:3000])
            [(check, status)] = rehearsal_checks.items()
            text = pages.open(f"/assets/{REHEARSAL}?view=checks", check, "Evaluation result", shot="08-reconstructability-checks")
            assert re.search(rf"Evaluation result\s+{CHECK_OUTCOME[status]}\b", text), (check, status, text[:3000])
        finally:
            browser.close()

    assert all(p.stat().st_size > 10_000 for p in pages.taken), [(p.name, p.stat().st_size) for p in pages.taken]
