"""`dsv diff` through the real console script: the JSON shape, the human summary, exit codes (0 whether or not
the realizations differ; resolution failures keep theirs; different keys exit 12), on a config-only world and on fraud."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.examples.fraud.demo_diff import later_chargebacks
from dsv_platform.services.publication.realization import build_realization
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_diff import BY_KEY, READINGS_SOURCE
from dsv_platform_tests.services.test_generic_realization import CALIBRATIONS, READINGS, at, calibration_table, land_and_load, meters_table

DSV = Path(sys.executable).with_name("dsv")
KEYS = {
    "a",
    "b",
    "identical",
    "key",
    "added",
    "removed",
    "changed",
    "unchanged",
    "partitions",
    "columns",
    "label_flips",
    "split_reassignments",
    "sources",
    "label_version",
}


def dsv(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DSV), *args], env=env, capture_output=True, text=True, timeout=300)


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dsv: error:") and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def meters(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff-cli")
    config = write_config(root / "config", {"sources/readings.yaml": READINGS_SOURCE, "datasets/readings_by_key_v1.yaml": BY_KEY})
    with build_platform(dataclasses.replace(settings_at(root / "home"), config_dir=config)) as p:
        land_and_load(p, "meters", meters_table(READINGS), "all", at(6, 2), "parquet")
        land_and_load(p, "calibration", calibration_table(CALIBRATIONS), "cal", at(6, 3), "jsonl")
        land_and_load(p, "readings", meters_table(READINGS), "all", at(6, 2), "parquet")
        first = build_realization(p, p.config.dataset("meter_readings", "v1")).ref
        by_key = build_realization(p, p.config.dataset("readings_by_key", "v1")).ref
        land_and_load(p, "meters", meters_table([("r3", "m-a", at(4, 8), "3.750"), ("r6", "m-b", at(5, 22), "9.000")]), "fix", at(7, 2), "parquet")
        second = build_realization(p, p.config.dataset("meter_readings", "v1")).ref
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_") and k != "DAGSTER_HOME"}
    env.update(DSV_HOME=str(root / "home"), DSV_CONFIG_DIR=str(config))
    return env, first, second, by_key


def test_json_is_one_object_with_the_documented_keys(meters) -> None:
    env, first, second, _ = meters
    result = dsv(env, "diff", first, second, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == KEYS and (doc["a"]["ref"], doc["b"]["ref"], doc["key"]) == (first, second, ["reading_id"])
    assert (doc["added"], doc["removed"], doc["changed"]) == ({"count": 1, "examples": ["r6"]}, {"count": 0, "examples": []}, {"count": 1, "examples": ["r3"]})
    assert doc["unchanged"] == doc["a"]["rows"] - 1 and doc["columns"]["changed"]["kwh"] == 1
    assert (doc["partitions"]["equal"], [p["key"] for p in doc["partitions"]["differ"]]) == (1, ["read_day=2026-01-04", "read_day=2026-01-05"])
    assert doc["label_flips"] == [] and doc["label_version"] == {"a": None, "b": None, "same": True}
    assert {s["table"] for s in doc["sources"]} == {"meters", "calibration"} and not next(s for s in doc["sources"] if s["table"] == "meters")["same"]


def test_human_summary_and_exit_0_whether_or_not_they_differ(meters) -> None:
    env, first, second, _ = meters
    differ = dsv(env, "diff", first, second, "--examples", "1")
    assert differ.returncode == 0, differ.stderr
    out = differ.stdout
    assert "content differs" in out and re.search(r"rows\s+added 1  removed 0  changed 1  unchanged \d+", out), out
    assert "partitions   1 equal (not read), 2 changed, 0 only in a, 0 only in b" in out and "read_day=2026-01-04: changed" in out
    assert re.search(r"columns\s+kwh 1\n", out) and 'e.g. "r3"' in out and "label        -  (same)" in out
    same = dsv(env, "diff", second, second)
    assert same.returncode == 0 and "identical content" in same.stdout and "added 0  removed 0  changed 0" in same.stdout


def test_failures_are_one_line_with_their_exit_codes(meters) -> None:
    env, first, _, by_key = meters
    one_line_error(dsv(env, "diff", first, "meter_readings:v9"), 3)
    missing = dsv(env, "diff", first, "meter_readings:v9", "--json")
    one_line_error(missing, 3)
    assert json.loads(missing.stdout)["error"] == "NOT_FOUND"
    mismatch = dsv(env, "diff", first, by_key)
    one_line_error(mismatch, 12)
    assert "keyed by ['reading_id']" in mismatch.stderr
    one_line_error(dsv(env, "diff", first, first, "--examples", "-1"), 2)
    one_line_error(dsv(env, "diff", first, "not a ref"), 2)


def test_fraud_v5_to_v6_prints_the_label_flips(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home")
    world.ingest(later_chargebacks(world.domain, world.domain.days(8)))
    v5, v6 = world.build("v5").ref, world.build("v6").ref
    world.platform.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_") and k != "DAGSTER_HOME"} | {"DSV_HOME": str(tmp_path / "home")}
    doc = json.loads(dsv(env, "diff", v5, v6, "--json").stdout)
    (flips,) = doc["label_flips"]
    assert flips["column"] == "is_fraud" and flips["0->1"]["count"] > 0
    human = dsv(env, "diff", v5, v6)
    assert human.returncode == 0, human.stderr
    assert f"label flips  is_fraud: 0->1 {flips['0->1']['count']:,}" in human.stdout and f"is_fraud: 1->0 {flips['1->0']['count']:,}" in human.stdout
    assert "label        fraud:v5 -> fraud:v6" in human.stdout and "labels_fraud_v6: - ->" in human.stdout
