"""`diff_realizations` on real realizations (SQLite registry and catalog, local objects), checked against a pandas merge.

The fraud world: label v5 vs v6 once later chargebacks are known (label flips), a late feature correction
(changed rows in exactly the partitions whose leaves differ), late events (added rows), a new split salt
(reassignments). A config-only world unlike fraud: string key, no label, equal partitions never read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from dsv_platform import open_dataset
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.diff.diff import DiffError
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.demo_diff import later_chargebacks
from dsv_platform.services.publication.datasets import open_dataset as open_platform_dataset
from dsv_platform.services.publication.diff import diff_realizations
from dsv_platform.services.publication.realization import RealizationBuild, build_realization
from dsv_platform_tests.core.config_support import DATASET, METERS, write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.support import World, definition
from dsv_platform_tests.services.test_generic_realization import CALIBRATIONS, READINGS, at, calibration_table, land_and_load, meters_table

D = dt.date


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World.create(tmp_path_factory.mktemp("diff") / "dsv")


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> World:
    """A world that also knows the chargebacks reported after its last day (the ones v5 and v6 disagree on)."""
    world = World.create(tmp_path_factory.mktemp("diff-labels") / "dsv")
    world.ingest(later_chargebacks(world.domain, world.domain.days(8)))
    return world


def frame(world_or_platform, build: RealizationBuild) -> pd.DataFrame:
    settings = world_or_platform.settings
    return open_dataset(build.ref, settings=settings).to_pandas()


def oracle(a: pd.DataFrame, b: pd.DataFrame, key: str) -> dict[str, object]:
    """Added/removed keys and per-column change counts by an outer merge (null == null)."""
    m = a.merge(b, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"]
    columns, changed = {}, pd.Series(False, index=both.index)
    for c in (c for c in a.columns if c in b.columns and c != key):
        x, y = both[f"{c}_a"].astype(object), both[f"{c}_b"].astype(object)
        differ = ~((x == y) | (x.isna() & y.isna()))
        columns[c], changed = int(differ.sum()), changed | differ
    return {
        "added": set(m.loc[m["_merge"] == "right_only", key]),
        "removed": set(m.loc[m["_merge"] == "left_only", key]),
        "changed": set(both.loc[changed, key]),
        "columns": columns,
    }


def leaves_differ(a: RealizationBuild, b: RealizationBuild) -> set[str]:
    left, right = ({p.key: p.hash for p in x.manifest.partitions} for x in (a, b))
    return {k for k in left.keys() | right.keys() if left.get(k) != right.get(k)}


def test_label_v5_to_v6_shows_the_label_flips_by_example_id(labelled: World) -> None:
    world = labelled
    v5, v6 = world.build("v5"), world.build("v6")
    diff = diff_realizations(world.platform, v5.ref, v6.ref, examples=10_000)
    doc = diff.to_document()
    a, b = frame(world, v5), frame(world, v6)
    m = a.merge(b, on="transaction_id", suffixes=("_5", "_6"))
    up, down = set(m.loc[~m.is_fraud_5 & m.is_fraud_6, "transaction_id"]), set(m.loc[m.is_fraud_5 & ~m.is_fraud_6, "transaction_id"])
    (flips,) = doc["label_flips"]
    assert flips["column"] == "is_fraud" and len(up) > 0  # a 90-day window labels more chargebacks than a 60-day one
    assert (flips["0->1"]["count"], set(flips["0->1"]["examples"])) == (len(up), up)
    assert (flips["1->0"]["count"], set(flips["1->0"]["examples"])) == (len(down), down)
    want = oracle(a, b, "transaction_id")
    assert doc["columns"]["changed"] == want["columns"] and doc["columns"]["changed"]["label_version"] == len(a)
    assert doc["label_version"] == {"a": "fraud:v5", "b": "fraud:v6", "same": False}
    sources = {s["table"]: s for s in doc["sources"]}
    assert sources["labels_fraud_v5"]["b"] is None and sources["labels_fraud_v6"]["a"] is None and sources["transactions"]["same"]
    assert doc["split_reassignments"] == {"count": 0, "moves": {}, "examples": [], "compared": False}  # same examples, same policy


def test_a_late_correction_changes_rows_in_exactly_the_differing_partitions(world: World) -> None:
    world.ingest([events.buggy_feature_batch(world.domain, D(2026, 6, 6))])
    before = world.build()
    world.ingest(events.feature_backfill(world.domain, D(2026, 6, 6), D(2026, 6, 6), recorded_on=D(2026, 6, 12)))
    after = world.build()
    doc = diff_realizations(world.platform, before.ref, after.ref, examples=10_000).to_document()
    assert {p["key"] for p in doc["partitions"]["differ"]} == leaves_differ(before, after) == {"event_date=2026-06-07"}
    assert doc["partitions"]["equal"] == len(after.manifest.partitions) - 1
    want = oracle(frame(world, before), frame(world, after), "transaction_id")
    assert want["changed"] and set(doc["changed"]["examples"]) == want["changed"] and doc["changed"]["count"] == len(want["changed"])  # type: ignore[arg-type]
    assert doc["added"]["count"] == doc["removed"]["count"] == 0 and not want["added"] and not want["removed"]
    assert {c: n for c, n in doc["columns"]["changed"].items() if n} == {c: n for c, n in want["columns"].items() if n}  # type: ignore[attr-defined]
    assert doc["columns"]["changed"]["amount_sum_7d"] > 0 and doc["label_flips"][0]["0->1"]["count"] == 0
    assert doc["unchanged"] == after.manifest.rows - doc["changed"]["count"]
    assert doc["sources"] and any(not s["same"] for s in doc["sources"] if s["table"] == "account_features")


def test_late_events_are_added_rows_and_a_new_salt_reassigns_splits(world: World) -> None:
    before = world.build()
    world.ingest([events.late_transactions(world.domain, D(2026, 6, 2), arrived=D(2026, 6, 9), count=7)])
    after = world.build()
    doc = diff_realizations(world.platform, before.ref, after.ref).to_document()
    late = {i + events.LATE_ID_OFFSET for i in world.domain.transactions(D(2026, 6, 2)).column("transaction_id").to_pylist()[:7]}
    assert (doc["added"]["count"], set(doc["added"]["examples"]), doc["changed"]["count"], doc["removed"]["count"]) == (7, late, 0, 0)
    assert [p["key"] for p in doc["partitions"]["differ"]] == ["event_date=2026-06-02"]
    assert doc["split_reassignments"]["compared"] and doc["split_reassignments"]["count"] == 0  # group split: old examples keep their split

    v6 = definition("v6")
    policy = {**v6.split_policy, "hash_split": {**v6.split_policy["hash_split"], "salt": "fraud-2027"}}
    v7 = dataclasses.replace(v6, version="v7", split_policy=policy, document={**v6.document, "version": "v7", "split_policy": policy})
    resalted = build_realization(world.platform, v7)  # the same rows, split with a new salt
    moved = diff_realizations(world.platform, after.ref, resalted.ref, examples=10_000).to_document()
    old = open_dataset(after.ref, settings=world.settings).split_assignment.to_pandas()
    new = open_dataset(resalted.ref, settings=world.settings).split_assignment.to_pandas()
    m = old.merge(new, on="transaction_id", suffixes=("_a", "_b"))
    m = m[m.split_a != m.split_b]
    assert moved["split_reassignments"]["count"] == len(m) > 0 and set(moved["split_reassignments"]["examples"]) == set(m.transaction_id)
    assert moved["split_reassignments"]["moves"] == {f"{f}->{t}": int(n) for (f, t), n in m.groupby(["split_a", "split_b"]).size().items()}
    assert moved["partitions"]["equal"] == len(after.manifest.partitions) and moved["changed"]["count"] == 0  # rows identical


# ---------------------------------------------------------------- a world unlike fraud

# the same readings under another key name (a source aliasing reading_id to reading_key)
READINGS_SOURCE = (
    METERS.replace("name: meters", "name: readings")
    .replace("reading_id", "reading_key")
    .replace("{kwh_total: kwh}", "{kwh_total: kwh, reading_id: reading_key}")
)
BY_KEY = DATASET.replace("meter_readings", "readings_by_key").replace("base: meters", "base: readings").replace("reading_id", "reading_key")


@pytest.fixture
def meters(tmp_path: Path) -> Platform:
    config = write_config(tmp_path / "config", {"sources/readings.yaml": READINGS_SOURCE, "datasets/readings_by_key_v1.yaml": BY_KEY})
    settings = dataclasses.replace(settings_at(tmp_path / "home"), config_dir=config)
    with build_platform(settings) as p:
        yield p


def test_a_config_only_dataset_diff_reads_only_the_differing_partitions(meters: Platform) -> None:
    land_and_load(meters, "meters", meters_table(READINGS), "all", at(6, 2), "parquet")
    land_and_load(meters, "calibration", calibration_table(CALIBRATIONS), "cal", at(6, 3), "jsonl")
    definition_ = meters.config.dataset("meter_readings", "v1")
    first = build_realization(meters, definition_)
    fix = [("r3", "m-a", at(4, 8), "3.750"), ("r6", "m-b", at(5, 22), "9.000")]  # r3 corrected, r6 late, both recorded later
    land_and_load(meters, "meters", meters_table(fix), "fix", at(7, 2), "parquet")
    second = build_realization(meters, definition_)
    diff = diff_realizations(meters, first.ref, second.ref)
    doc = diff.to_document()
    want = oracle(frame(meters, first), frame(meters, second), "reading_id")
    assert (set(doc["added"]["examples"]), set(doc["changed"]["examples"]), doc["removed"]["count"]) == (want["added"], want["changed"], 0)
    assert want["added"] == {"r6"} and want["changed"] == {"r3"} and {c: n for c, n in doc["columns"]["changed"].items() if n} == {"kwh": 1}
    differ = leaves_differ(first, second)
    assert {p["key"] for p in doc["partitions"]["differ"]} == differ == {"read_day=2026-01-04", "read_day=2026-01-05"}
    assert doc["label_flips"] == [] and doc["label_version"] == {"a": None, "b": None, "same": True}

    # the equal partition is never read: with its object gone, the diff still answers and a full read is CORRUPT
    (equal,) = [p for p in first.manifest.partitions if p.key not in differ]
    _delete(meters, equal.object)
    with pytest.raises(CorruptError):
        open_platform_dataset(meters, first.ref).to_arrow()
    assert diff_realizations(meters, first.ref, second.ref).to_document() == doc
    assert diff_realizations(meters, second.ref, second.ref).to_document()["identical"]


def _delete(platform: Platform, digest: str) -> None:
    """Delete an object's stored bytes (its sealed copy when encrypted) without erasing its key."""
    sealed = platform.store.keys.sealed(digest)
    if sealed is not None:
        platform.store.sealed_store.delete(sealed)
    else:
        platform.objects.delete(digest)


def test_different_keys_or_an_unknown_ref_are_typed_errors(meters: Platform) -> None:
    land_and_load(meters, "meters", meters_table(READINGS), "all", at(6, 2), "parquet")
    land_and_load(meters, "calibration", calibration_table(CALIBRATIONS), "cal", at(6, 3), "jsonl")
    by_id = build_realization(meters, meters.config.dataset("meter_readings", "v1"))
    land_and_load(meters, "readings", meters_table(READINGS), "all", at(6, 2), "parquet")
    by_key = build_realization(meters, meters.config.dataset("readings_by_key", "v1"))
    with pytest.raises(DiffError, match=r"keyed by \['reading_id'\].*\['reading_key'\]") as err:
        diff_realizations(meters, by_id.ref, by_key.ref)
    assert err.value.exit_code == 12
    with pytest.raises(NotFoundError):
        diff_realizations(meters, by_id.ref, "meter_readings:v9")
    with pytest.raises(DiffError, match="label column 'meter_id'"):
        diff_realizations(meters, by_id.ref, by_id.ref, label_columns=["meter_id"])
