"""A platform engineer rebuilds fraud_training_set:v6 from the UI and reads the result on the asset pages.

In the asset graph she narrows the view to the v6 snapshot and its splits, clicks "Materialize all" (a launchpad or
partition dialog, if the UI opens one, is confirmed), follows the launched run to its end, then reads the manifest
hash of that run's materialization on the snapshot's page and the splits' check result on the splits' page.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from dsv_platform_tests.ui.harness import CHECK_OUTCOME, HEX64, SNAPSHOT, SPLITS, check_outcomes, ended_status, materializations, node, shown, step
from dsv_platform_tests.ui.steps import Steps

pytestmark = [pytest.mark.ui, pytest.mark.xdist_group("ui")]

SELECTION = f'key:"{SNAPSHOT}" or key:"{SPLITS}"'
RUN_TIMEOUT = 420.0  # two cores shared by the whole suite: the run's own process starts slowly


def _launch_from_graph(steps: Steps) -> str:
    """Filter the global graph to the two assets, Materialize all, confirm a dialog if any; the launched run's id."""
    page = steps.page
    steps.open("/asset-groups", "Global asset lineage", shot="graph")
    page.locator(".CodeMirror").first.click()  # "Search and filter assets"
    page.keyboard.type(SELECTION)
    page.keyboard.press("Enter")
    steps.wait(node(SNAPSHOT), node(SPLITS), "Materialize all", shot="graph-filtered", settle=1.5)
    steps.button("Materialize all").click()
    launched = page.locator("a[href^='/runs/']").filter(has_text=re.compile(r"^\s*View\s*$"))
    dialog = page.get_by_role("dialog")
    expect(launched.or_(dialog).first).to_be_visible(timeout=60_000)
    if dialog.count() and not launched.count():  # launchpad / partition selection: accept what it proposes
        steps.screenshot("launch-dialog")
        dialog.get_by_role("button", name=re.compile(r"^(Launch|Materialize)")).last.click()
        expect(launched.first).to_be_visible(timeout=60_000)
    steps.wait("Launched run", shot="run-launched", settle=0)
    href = launched.first.get_attribute("href") or ""
    match = re.fullmatch(r"/runs/([0-9a-f-]{36})", href)
    assert match, href
    launched.first.click()
    return match[1]


def _follow_run(steps: Steps, run_id: str) -> None:
    steps.wait(run_id[:8], step(SNAPSHOT), step(SPLITS), shot="run-page")
    header = steps.page.get_by_text(re.compile(r"^(Success|Failure|Canceled)$")).first
    expect(header).to_be_visible(timeout=RUN_TIMEOUT * 1000)
    status = ended_status(steps.base, run_id, RUN_TIMEOUT)
    steps.wait("Success" if status == "SUCCESS" else "Failure", shot="run-finished", settle=1.0)
    assert status == "SUCCESS", f"run {run_id} ended {status}: see the run-finished screenshot"


def test_platform_engineer_materializes_the_dataset_from_the_ui_and_reads_hash_and_checks(steps: Steps) -> None:
    before = {m["run_id"] for m in materializations(steps.base, SNAPSHOT)}
    run_id = _launch_from_graph(steps)
    assert run_id not in before
    _follow_run(steps, run_id)

    [latest] = materializations(steps.base, SNAPSHOT, limit=1)
    assert latest["run_id"] == run_id, (latest["run_id"], run_id)  # the run launched from the UI is the newest one
    snapshot = latest["metadata"]
    for key in ("manifest_hash", "content_hash"):
        assert HEX64.fullmatch(str(snapshot.get(key))), f"{SNAPSHOT} {key}: {snapshot.get(key)!r}"
    split_checks = check_outcomes(steps.base, SPLITS)
    assert split_checks and all(status in CHECK_OUTCOME and rid == run_id for status, rid in split_checks.values()), split_checks

    # The snapshot's page: that run's manifest and content hashes, its reference, and its place in the lineage.
    needles = ("manifest_hash", snapshot["manifest_hash"], "content_hash", snapshot["content_hash"], str(snapshot["ref"]))
    keys = (shown(k) for k in ("canonical/transactions", "labels/fraud", SPLITS, "models/fraud_model"))
    text = steps.open(f"/assets/{SNAPSHOT}", *needles, *keys, shot="snapshot-overview")
    assert re.search(rf"manifest_hash\s+(?:\S.*\n\s*)?{snapshot['manifest_hash']}", text), text[:3000]
    steps.open(f"/assets/{SNAPSHOT}?view=events", "Materialized in run", run_id[:8], *needles[:4], shot="snapshot-events")

    # The snapshot's own checks (if it has any), evaluated in that run, are listed on its checks tab.
    snapshot_checks = check_outcomes(steps.base, SNAPSHOT)
    assert all(status in CHECK_OUTCOME and rid == run_id for status, rid in snapshot_checks.values()), snapshot_checks
    if snapshot_checks:
        steps.open(f"/assets/{SNAPSHOT}?view=checks", *snapshot_checks, "Evaluation result", shot="snapshot-checks")

    # The splits' entity-disjointness check, evaluated in that run, and its outcome.
    for name, (status, _) in split_checks.items():
        text = steps.open(f"/assets/{SPLITS}?view=checks", name, "Evaluation result", "Target materialization", shot="splits-checks")
        assert re.search(rf"Evaluation result\s+{CHECK_OUTCOME[status]}\b", text), (name, status, text[:3000])
        assert steps.page.locator(f"a[href^='/runs/{run_id}']").count(), f"the check page links no evaluation to run {run_id}"
    steps.assert_screenshots()
