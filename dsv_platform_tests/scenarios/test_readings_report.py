"""Issue 14: the readings example needs no platform code, and its quarterly report asset produces an artifact whose
files print the manifest hash. The Dagster assets run on an ephemeral instance over the embedded stores."""

from __future__ import annotations

import ast
import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.reproduction.artifact_manifest import footer
from dsv_platform.defs import build_defs
from dsv_platform.examples.readings import CONFIG_DIR, DATASET, generator
from dsv_platform.examples.readings.landing import land_and_load
from dsv_platform.examples.readings.report import PARAMETERS, PRODUCER, nearest_rank
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.reproduction.artifacts import locate_artifact
from dsv_platform.settings import load_settings

PACKAGE = Path(__file__).resolve().parents[2] / "dsv_platform"
DAYS = [dt.date(2026, 1, 1), dt.date(2026, 2, 16), dt.date(2026, 3, 29), dt.date(2026, 3, 31)]


def test_the_readings_configuration_needs_no_platform_code():
    """The folder loads and the factory builds its assets; no platform module imports the readings example or names its tables."""
    config = load_config(CONFIG_DIR)
    assert set(config.sources) == {"meter_readings", "calibration", "meters"} and [d.ref for d in config.datasets] == [DATASET]
    platform_files = [p for p in PACKAGE.rglob("*.py") if "examples" not in p.relative_to(PACKAGE).parts]
    imports = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for path in platform_files
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [None])
    ]
    assert not [m for m in imports if m and m.startswith("dsv_platform.examples")]
    named = [p for p in platform_files if any(word in _code(p) for word in ("meter_readings", "readings_hourly", "kwh_calibrated"))]
    assert named == []


def _code(path: Path) -> str:
    """The file's names and string literals, docstrings and comments left out (they may cite the example; code may not name it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scopes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    docstrings = {id(n.body[0].value) for n in scopes if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]
    words += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)] + [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    return " ".join(words)


def test_nearest_rank_takes_the_ceil_of_p_n_over_100th_value():
    values = [Decimal(v) for v in range(100, 0, -1)]
    assert nearest_rank(values, 99) == Decimal(99) and nearest_rank(values, 100) == Decimal(100) and nearest_rank(values, 1) == Decimal(1)
    assert nearest_rank([Decimal("0.5"), Decimal("0.1"), Decimal("0.3")], 99) == Decimal("0.5")
    with pytest.raises(ValueError, match="no hourly loads"):
        nearest_rank([], 99)


@pytest.fixture(scope="module")
def materialized(tmp_path_factory):
    settings = load_settings({"DSV_CONFIG_DIR": str(CONFIG_DIR), "DSV_HOME": str(tmp_path_factory.mktemp("readings-report"))})
    with build_platform(settings) as platform:
        land_and_load(platform, generator.initial_batches(DAYS))
    defs = build_defs(settings)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    with dg.DagsterInstance.ephemeral() as instance:
        snapshot = dg.materialize([*defs.assets], selection="datasets/readings_hourly/v1", instance=instance, resources=defs.resources)
        report = dg.materialize([*defs.assets], selection="artifacts/quarterly_consumption_report", instance=instance, resources=defs.resources)
    with build_platform(settings) as platform:
        yield platform, keys, snapshot, report


def _metadata(result: dg.ExecuteInJobResult, key: str) -> dict:
    events = [e for e in result.get_asset_materialization_events() if e.materialization.asset_key.to_user_string() == key]
    return {k: v.value for k, v in events[-1].materialization.metadata.items()}


def test_the_factory_builds_a_snapshot_without_splits_and_the_report_asset(materialized):
    _, keys, snapshot, report = materialized
    assert {"raw/meter_readings", "canonical/meters", "datasets/readings_hourly/v1", "artifacts/quarterly_consumption_report"} <= keys
    assert "datasets/readings_hourly/v1/splits" not in keys
    assert snapshot.success and report.success


def test_the_report_prints_its_manifest_hash_and_its_numbers_match_the_realization(materialized):
    platform, _, snapshot, report = materialized
    ref, meta = _metadata(snapshot, "datasets/readings_hourly/v1")["ref"], _metadata(report, "artifacts/quarterly_consumption_report")
    record = locate_artifact(platform, meta["manifest_hash"][:12])
    assert record.manifest_hash == meta["manifest_hash"] and meta["footer"] == footer(record.manifest_hash)
    assert record.manifest["inputs"][0]["ref"] == ref and record.manifest["parameters"] == PARAMETERS
    assert record.manifest["environment"]["tz_database"]["zones"].keys() == {"Europe/Berlin"}
    page = platform.store.get(record.files["report.html"]).decode()
    assert f"manifest sha256:{record.manifest_hash}" in page and "data:image/png;base64," in meta["figure"]
    with open_dataset(platform, ref) as ds:
        rows = ds.to_arrow().to_pylist()
    totals: dict[str, Decimal] = {}
    hours: dict[dt.datetime, Decimal] = {}
    for r in rows:
        totals[r["region"]] = totals.get(r["region"], Decimal(0)) + r["kwh"]
        hours[r["hour_start"]] = hours.get(r["hour_start"], Decimal(0)) + r["kwh"]
    loads = sorted(hours.values())
    results = record.manifest["results"]
    assert results["total_kwh_by_region"] == {k: str(v) for k, v in sorted(totals.items())}
    assert results["p99_hourly_load_kwh"] == str(loads[math.ceil(0.99 * len(loads)) - 1]) and results["hours"] == len(loads) == 4 * 24 - 1
    png = platform.store.get(record.files["figure.png"])
    assert png.startswith(b"\x89PNG") and b"tIME" not in png and b"Software" not in png


def test_rendering_the_report_again_gives_the_same_bytes(materialized):
    platform, _, snapshot, _ = materialized
    record = locate_artifact(platform, "quarterly_consumption_report")
    with open_dataset(platform, _metadata(snapshot, "datasets/readings_hourly/v1")["ref"]) as ds:
        inputs: dict[str, pa.Table] = {DATASET: ds.to_arrow()}
    assert PRODUCER.compute(inputs, PARAMETERS, 0) == record.manifest["results"]
    again = PRODUCER.render(inputs, record.manifest["results"], footer(record.manifest_hash))
    assert {name: platform.store.get(digest) for name, digest in record.files.items()} == again
