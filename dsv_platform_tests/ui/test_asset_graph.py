"""Anyone opening ``make ui`` first sees the global asset lineage (every group, then every asset and its checks) and the catalog."""

from __future__ import annotations

import time

import pytest

from dsv_platform_tests.ui.harness import MODEL, REHEARSAL, SNAPSHOT, SPLITS, node, shown
from dsv_platform_tests.ui.steps import Steps

pytestmark = [pytest.mark.ui, pytest.mark.xdist_group("ui")]

GROUPS = ("raw", "canonical", "labels", "datasets", "models", "reproducibility")
ASSETS = (
    "raw/transactions",
    "canonical/transactions",
    "labels/fraud",
    "datasets/fraud_training_set/v5",
    SNAPSHOT,
    SPLITS,
    MODEL,
    REHEARSAL,
    "realization_integrity",
)


def test_global_lineage_shows_every_group_then_every_asset_with_its_checks(steps: Steps) -> None:
    steps.open("/asset-groups", "Global asset lineage", *GROUPS, shot="lineage-groups")
    page = steps.page
    deadline = time.monotonic() + 30
    while "transactions" not in steps.text() and time.monotonic() < deadline:
        page.keyboard.press("Alt+e")  # the UI's shortcut: expand all groups
        time.sleep(1.5)
    expanded = page.url
    assert "expanded=" in expanded, expanded
    page.set_viewport_size({"width": 2400, "height": 2800})  # room for the whole expanded graph (with the table_heads group)
    page.goto(expanded)  # re-open so the expanded graph is laid out for this viewport
    # At this size the nodes are drawn in detail: full names, "Asset checks", latest event.
    steps.wait(*(node(a) for a in ASSETS), "Asset checks", "splits", "head", shot="lineage-expanded", settle=2.5)
    steps.assert_screenshots()


def test_catalog_lists_every_asset_by_its_full_name(steps: Steps) -> None:
    steps.page.set_viewport_size({"width": 1600, "height": 3000})  # tall: the list is virtualized
    steps.open("/assets", *(shown(a) for a in ASSETS), shot="catalog")
    steps.assert_screenshots()
