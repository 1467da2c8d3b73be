"""An ML engineer goes from the model to the data it was trained on, in the UI.

On fraud_model's page she reads the manifest it was trained on, opens its upstream lineage, clicks the v6 snapshot
in that graph and, on the snapshot's page, finds the same manifest hash and the pinned Iceberg snapshot ids.
"""

from __future__ import annotations

import re

import pytest

from dsv_platform_tests.ui.harness import HEX64, MODEL, SNAPSHOT, SPLITS, latest_metadata, materializations, node
from dsv_platform_tests.ui.steps import Steps

pytestmark = [pytest.mark.ui, pytest.mark.xdist_group("ui")]


def _pinned(records: list[dict[str, object]]) -> dict[str, str]:
    """table -> snapshot id, from the pinned_snapshots table (table, snapshot id, tag)."""
    assert records, records
    return {str(r["table"]): str(r["snapshot id"]) for r in records}


def test_ml_engineer_follows_the_model_lineage_to_its_pinned_snapshots(steps: Steps) -> None:
    model = latest_metadata(steps.base, MODEL)
    trained_on = str(model["trained_on_manifest_hash"])
    assert HEX64.fullmatch(trained_on), model
    # The snapshot materialization the model was trained on (a later rebuild from the same inputs has the same manifest).
    built = [m["metadata"] for m in materializations(steps.base, SNAPSHOT) if m["metadata"].get("manifest_hash") == trained_on]
    assert built, f"no {SNAPSHOT} materialization has the manifest {MODEL} was trained on ({trained_on})"
    pinned = _pinned(built[0]["pinned_snapshots"])

    steps.open(f"/assets/{MODEL}", "trained_on_manifest_hash", trained_on, "pinned_snapshots", *pinned.values(), shot="model-overview")

    page = steps.page
    page.set_viewport_size({"width": 2200, "height": 1400})  # room for the upstream graph
    page.get_by_role("tab", name="Lineage").click()
    steps.wait("Upstream", "Graph depth", shot="model-lineage")
    steps.button("Upstream").click()
    steps.button("All").click()
    steps.wait(node(SNAPSHOT), node(SPLITS), "transactions", "account_features", shot="model-upstream", settle=2.0)  # nodes: last key component
    assert "lineageScope=upstream" in page.url, page.url

    page.get_by_text(node(SNAPSHOT), exact=True).first.click()  # the snapshot node in the upstream graph
    page.wait_for_url(re.compile(rf"/assets/{SNAPSHOT}\b"), timeout=30_000)
    steps.wait(*SNAPSHOT.split("/"), "Graph depth", shot="snapshot-lineage")  # its breadcrumbs: datasets, fraud_training_set, v6
    page.set_viewport_size({"width": 1600, "height": 1600})
    page.get_by_role("tab", name="Overview").click()
    text = steps.wait("manifest_hash", trained_on, "pinned_snapshots", "snapshot id", *pinned, *pinned.values(), shot="snapshot-pinned")
    for table, snapshot_id in pinned.items():
        assert re.search(rf"{table}\s+{snapshot_id}\b", text), (table, snapshot_id, text[:4000])
    steps.assert_screenshots()
