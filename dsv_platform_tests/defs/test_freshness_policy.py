"""A definition's ``slo.usable_freshness`` is Dagster's own freshness policy on its snapshot asset (issue 27 item 3).

The Dagster UI and freshness alerts then show the dataset FAIL once its newest published realization is older
than the objective; ``dataset_observability``'s ``slos_met`` check stays the platform's own verdict (tighter
objectives than Dagster's one-minute floor are checked there only). Single-step and fanned-out snapshots alike.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path

import dagster as dg

from dsv_platform.defs import build_defs
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import CONFIG_DIR


def _append(folder: Path, name: str, text: str) -> None:
    path = folder / "datasets" / name
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _policy(defs: dg.Definitions, asset: str) -> dg.FreshnessPolicy | None:
    return defs.resolve_asset_graph().get(dg.AssetKey.from_user_string(asset)).freshness_policy


def test_usable_freshness_is_the_snapshot_assets_freshness_policy(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    _append(config, "fraud_training_set_v6.yaml", "slo: {usable_freshness: 26h, publication_lag: 6h}\n")
    _append(config, "fraud_training_set_v5.yaml", "fan_out: 2\nslo: {usable_freshness: 2d}\n")
    defs = build_defs(dataclasses.replace(load_settings({}).with_home(tmp_path / "dsv"), config_dir=config))
    v6, v5 = _policy(defs, "datasets/fraud_training_set/v6"), _policy(defs, "datasets/fraud_training_set/v5")
    assert isinstance(v6, dg.FreshnessPolicy) and v6.fail_window.to_timedelta() == dt.timedelta(hours=26)
    assert isinstance(v5, dg.FreshnessPolicy) and v5.fail_window.to_timedelta() == dt.timedelta(days=2)  # the fanned-out graph asset
    assert _policy(defs, "datasets/fraud_training_set/v6/splits") is None  # the objective is the realization's, not every asset's


def test_a_definition_without_slo_or_below_a_minute_gets_no_dagster_policy(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    _append(config, "fraud_training_set_v6.yaml", "slo: {usable_freshness: 30s}\n")
    defs = build_defs(dataclasses.replace(load_settings({}).with_home(tmp_path / "dsv"), config_dir=config))
    assert _policy(defs, "datasets/fraud_training_set/v6") is None and _policy(defs, "datasets/fraud_training_set/v5") is None
