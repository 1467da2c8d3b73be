"""Service levels (issue 27 item 3, first part): ``slo:`` thresholds on usable freshness and publication lag, checked.

A real world (SQLite catalog and registry, local objects) on a copy of the fraud configuration whose v6 declares
both objectives and v5 one: v6 is built (fresh, but published months after its June watermark), v5 is not.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.core.config.dataset_definition import parse_definition
from dsv_platform.core.config_yaml import ConfigError, read_yaml
from dsv_platform.defs import build_defs
from dsv_platform.defs.rehearsal import SLOS_MET, dataset_observability
from dsv_platform.services.publication.status import platform_status
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import CONFIG_DIR, World

V6 = CONFIG_DIR / "datasets" / "fraud_training_set_v6.yaml"


def _with_slo(folder: Path, name: str, slo: str) -> None:
    path = folder / "datasets" / name
    path.write_text(path.read_text(encoding="utf-8") + f"slo: {slo}\n", encoding="utf-8")


@pytest.fixture
def world(tmp_path: Path) -> World:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    _with_slo(config, "fraud_training_set_v6.yaml", "{usable_freshness: 26h, publication_lag: 6h}")
    _with_slo(config, "fraud_training_set_v5.yaml", "{usable_freshness: 2d}")
    settings = dataclasses.replace(load_settings({}).with_home(tmp_path / "dsv"), config_dir=config)
    w = World.create(settings=settings, rows_per_day=40, days=3)
    w.build("v6")
    return w


def test_status_reports_each_objective_met_or_missed(world: World) -> None:
    status = {s.ref: s for s in platform_status(world.platform)}
    v6 = {o["objective"]: o for o in status["fraud_training_set:v6"].slo}
    assert v6["usable_freshness"]["met"] and v6["usable_freshness"]["bound_seconds"] == 26 * 3600
    assert not v6["publication_lag"]["met"] and v6["publication_lag"]["observed_seconds"] > 6 * 3600  # a June watermark, published now
    [v5] = status["fraud_training_set:v5"].slo
    assert v5 == {"objective": "usable_freshness", "bound_seconds": 2 * 86400.0, "observed_seconds": None, "met": False}  # nothing usable


def test_the_observability_asset_fails_its_check_naming_what_is_missed(world: World) -> None:
    defs = build_defs(world.settings)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([dataset_observability], resources=defs.resources, instance=instance)
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == SLOS_MET]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    # the lag's part over the bound: our build (published months after the June watermark), not the sources
    assert check.description == "missed: fraud_training_set:v5 usable_freshness, fraud_training_set:v6 publication_lag (over: compute)", check.description
    rows = [r.data for r in check.metadata["objectives"].value.records]
    assert [(r["definition"], r["objective"], r["met"], r["over"]) for r in rows] == [
        ("fraud_training_set:v5", "usable_freshness", False, ""),
        ("fraud_training_set:v6", "usable_freshness", True, ""),
        ("fraud_training_set:v6", "publication_lag", False, "compute"),
    ]


def test_dsv_status_prints_the_objectives(world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"DSV_HOME": str(world.settings.home), "DSV_CONFIG_DIR": str(world.settings.config_dir)}
    out = DsvCli(capsys, monkeypatch, env)("status")
    assert out.code == 0, out.err
    assert "  slo usable_freshness <= 26.0 h: 0.0 h, met" in out.out, out.out
    assert "  slo usable_freshness <= 48.0 h: no usable realization, MISSED" in out.out and "slo publication_lag <= 6.0 h" in out.out


def test_an_slo_is_not_part_of_the_recipe_and_a_bad_one_names_the_key() -> None:
    doc = read_yaml(V6)
    plain = parse_definition(dict(doc), source=V6)
    slo = parse_definition({**doc, "slo": {"usable_freshness": "26h"}}, source=V6)
    assert slo.recipe_hash == plain.recipe_hash and slo.slo is not None and plain.slo is None
    for bad, says in [({"freshness": "1h"}, "freshness"), ({"usable_freshness": "soon"}, "slo.usable_freshness"), ({}, "names no objective")]:
        with pytest.raises(ConfigError, match=says):
            parse_definition({**doc, "slo": bad}, source=V6)
