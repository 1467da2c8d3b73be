"""Composite keys split (issue 23, item 5): readings keyed ``[meter_id, read_at]``, YAML only, built end to end.

The example id of a composite key is its canonical encoding (docs/canonical-encoding.md, "Example ids"); the stored
assignment holds it with the key columns, so readers join it to the rows. One-column keys keep their exact bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.splits.split_checks import assignment_hash
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization import build_realization, check_splits
from dsv_platform.services.reproduction.raw_rebuild import rebuild_from_raw, split_of
from dsv_platform_tests.core.config_support import DATASET, METERS, write_config
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.services.test_generic_realization import CALIBRATIONS, READINGS, at, calibration_table, land_and_load, meters_table

GROUP_BLOCK = DATASET[DATASET.index("split_policy:") : DATASET.index("watermark:")]
GROUP = {"policy": "group-split/1", "group_column": "meter_id", "salt": "meters", "bounds": "train=50,test=100"}
TIME = {"policy": "time-split/1", "column": "read_at", "train_until": "2026-01-04T00:00:00Z", "validation_until": "2026-01-05T00:00:00Z"}
HASH = {"policy": "hash-split/1", "salt": "meters", "bounds": "train=50,test=100"}
SEEDED = {"policy": "seeded-random/1", "seed": 3, "parts": {"train": 1, "test": 1}}  # key_column: the composite example id
COMPOSITE = ("  key: [reading_id]\n  partition_by: read_day", "  key: [meter_id, read_at]\n  partition_by: read_day")


def composite_files(policy: dict, contract_edit: tuple[str, str] = ("", "")) -> dict[str, str]:
    """The meters source and the dataset, both keyed ``[meter_id, read_at]``, with ``policy``."""
    dataset = DATASET.replace(GROUP_BLOCK, yaml.safe_dump({"split_policy": policy}, sort_keys=False)).replace(*COMPOSITE)
    if contract_edit[0]:
        assert contract_edit[0] in dataset
        dataset = dataset.replace(*contract_edit)
    return {"sources/meters.yaml": METERS.replace("key: [reading_id]", "key: [meter_id, read_at]"), "datasets/meter_readings_v1.yaml": dataset}


@pytest.fixture
def make_platform(tmp_path: Path):
    opened = []

    def make(files: dict[str, str], **changes: object) -> Platform:
        root = tmp_path / f"p{len(opened)}"
        settings = dataclasses.replace(settings_at(root / "home"), config_dir=write_config(root / "config", files), **changes)
        context = build_platform(settings)
        opened.append(context)
        platform = context.__enter__()
        land_and_load(platform, "meters", meters_table(READINGS), "all", at(6, 2), "parquet")
        land_and_load(platform, "calibration", calibration_table(CALIBRATIONS), "cal", at(6, 3), "jsonl")
        return platform

    yield make
    for context in reversed(opened):
        context.__exit__(None, None, None)


def example_id(meter: str, read_at) -> str:
    return f"{meter}\t{int(read_at.timestamp()) * 1_000_000}"


def time_split(read_at) -> str:
    return "train" if read_at < at(4, 0) else "validation" if read_at < at(5, 0) else "test"


@pytest.mark.parametrize(("policy", "columns"), [
    (GROUP, ["example_id", "meter_id", "read_at", "split", "bucket"]),
    (TIME, ["example_id", "meter_id", "read_at", "split"]),
    (HASH, ["example_id", "meter_id", "read_at", "split", "bucket"]),
    (SEEDED, ["example_id", "meter_id", "read_at", "split", "bucket"]),
], ids=["group", "time", "hash", "seeded"])
@pytest.mark.parametrize("engine", ["duckdb", "arrow"])
def test_a_composite_key_dataset_builds_and_its_splits_check_and_read_back(make_platform, policy, columns, engine):
    platform = make_platform(composite_files(policy), build_engine=engine)
    definition = platform.config.dataset("meter_readings", "v1")
    build = build_realization(platform, definition)
    assert build.manifest.rows == len(READINGS) and all(g.passed for g in build.gates if g.blocking)
    check = check_splits(platform, build.ref, definition)
    assert check.report.passed and check.assignment_hash == build.manifest.splits.assignment_hash

    ds = open_dataset(platform, build.ref)
    assignment = ds.split_assignment
    assert assignment.column_names == columns
    want_ids = sorted((r[1], r[2]) for r in READINGS)
    assert assignment.column("example_id").to_pylist() == [example_id(m, t) for m, t in want_ids]
    assert assignment_hash(assignment, "example_id") == build.manifest.splits.assignment_hash
    split_of = {(r["meter_id"], r["read_at"]): r["split"] for r in assignment.to_pylist()}
    if policy is TIME:
        assert split_of == {(m, t): time_split(t) for m, t in want_ids}
    if policy is GROUP:  # every reading of a meter in the split of its meter
        assert all(len({s for (m, _), s in split_of.items() if m == meter}) == 1 for meter, _ in want_ids)
    if policy is HASH:  # the bucket hashes the composite id as a hash-split/1 string identifier
        buckets = {r["example_id"]: r["bucket"] for r in assignment.to_pylist()}
        assert buckets == {i: int(hashlib.sha256(f"meters:{i}".encode()).hexdigest(), 16) % 100 for i in buckets}

    for split in definition.policy().names:
        rows = ds.to_arrow(split=split)
        assert sorted(zip(rows["meter_id"].to_pylist(), rows["read_at"].to_pylist(), strict=True)) == sorted(k for k, s in split_of.items() if s == split)
        batched = pa.Table.from_batches(list(ds.iter_batches(split=split)), schema=rows.schema)  # partition order, then key order
        assert batched.sort_by([("meter_id", "ascending"), ("read_at", "ascending")]).equals(rows)
        assert "example_id" not in rows.column_names
    assert sum(ds.to_arrow(split=s).num_rows for s in definition.policy().names) == len(READINGS)


@pytest.mark.parametrize("policy", [GROUP, TIME], ids=["group", "time"])
def test_a_composite_key_realization_rebuilds_from_raw_with_the_same_assignment(make_platform, tmp_path, policy):
    platform = make_platform(composite_files(policy))
    definition = platform.config.dataset("meter_readings", "v1")
    build = build_realization(platform, definition)
    rebuilt = rebuild_from_raw(platform, build.manifest, workdir=tmp_path / "scratch")
    assert (rebuilt.content_hash, rebuilt.assignment_hash) == (build.content_hash, build.manifest.splits.assignment_hash)
    ds = open_dataset(platform, build.ref)
    for split in definition.policy().names:
        assert split_of(rebuilt, split, definition.contract.key).equals(ds.to_arrow(split=split))


GOLDEN = {  # one-column key [reading_id]: the assignment object's digest and the assignment hash, as on main before composite keys
    "group": (GROUP, "002c938cf7bb1232073a3a22492cc890ab518723e5ea4cb7672dffdcb9e3cc35", "8975b1e0cda5f65c0da25afe685d2ec5fa0f015913d09dcb08a05848a77461ae"),
    "time": (TIME, "e2ea6a4b11af880907f3515dc6f9048cca44d28b6179f52e96c6fcd6e759965a", "c47ec07628475739ba37b36f7937967ba3014572173a818dbfde051d0e83051b"),
    "hash": (HASH, "904a934649b255dd99930bd536a4b2df1aa1a7d1ecfc1a5a7d4da3ea1a022c0c", "970e0fbffebdbac19304180597e31406a49e904f8937ad4008da0ec864997972"),
}


def _half(value: str) -> str:
    """``bounds: train=50,test=100`` with salt ``meters``: the bucket is SHA-256 of ``meters:<value>``, big-endian, mod 100."""
    return "train" if int.from_bytes(hashlib.sha256(f"meters:{value}".encode()).digest(), "big") % 100 < 50 else "test"


RULES = {  # each policy's rule on (reading_id, meter_id, read_at) as docs/configuration.md states it, not the platform's code
    "group": lambda reading, meter, read_at: _half(meter),
    "time": lambda reading, meter, read_at: "train" if read_at < at(4, 0) else "validation" if read_at < at(5, 0) else "test",
    "hash": lambda reading, meter, read_at: _half(reading),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_one_column_keys_keep_their_assignment_bytes_and_hashes(make_platform, name):
    """The pins hold what main stored before composite keys; the assignment hash is also derived here, from each policy's
    rule and the hash's definition (sorted ``id TAB split`` lines), and the object's digest from the bytes it names."""
    policy, stored, hashed = GOLDEN[name]
    text = DATASET.replace(GROUP_BLOCK, yaml.safe_dump({"split_policy": policy}, sort_keys=False))
    platform = make_platform({"datasets/meter_readings_v1.yaml": text})
    definition = platform.config.dataset("meter_readings", "v1")
    splits = build_realization(platform, definition).manifest.splits
    assert (splits.assignment_object, splits.assignment_hash) == (stored, hashed)
    lines = "".join(f"{reading}\t{RULES[name](reading, meter, read_at)}\n" for reading, meter, read_at, _ in sorted(READINGS))
    assert hashed == hashlib.sha256(lines.encode()).hexdigest()
    assert stored == hashlib.sha256(platform.store.get(stored)).hexdigest()


def test_an_example_id_is_the_canonical_text_of_each_key_column_joined_by_tab(make_platform):
    tricky = [("m\tx", READINGS[0][2]), ("m\\", READINGS[1][2])]
    rows = [(f"r{i}", m, t, "1.000") for i, (m, t) in enumerate(tricky)]
    platform = make_platform(composite_files(HASH))
    land_and_load(platform, "meters", meters_table(rows), "tricky", at(6, 4), "parquet")
    definition = platform.config.dataset("meter_readings", "v1")
    ids = open_dataset(platform, build_realization(platform, definition).ref).split_assignment.column("example_id")
    for meter, read_at in tricky:
        escaped = meter.replace("\\", "\\\\").replace("\t", "\\t")
        assert pc.any(pc.equal(ids, example_id(escaped, read_at))).as_py()


@pytest.mark.parametrize(("policy", "contract_edit", "key", "says"), [
    (HASH, ("    - {name: factor,", "    - {name: example_id, type: string}\n    - {name: factor,"), "contract.columns", "rename the contract's column"),
    ({**TIME, "column": "example_id"}, None, "split_policy.column", "not the composite example id"),
    ({**TIME, "column": "meter_id"}, None, "split_policy.column", "must be a timestamp column, it is string"),
    ({**GROUP, "group_column": "site"}, None, "split_policy.group_column", "'site' is not a column"),
], ids=["example-id-column-taken", "time-on-example-id", "time-on-string", "group-unknown"])
def test_a_composite_key_policy_that_cannot_work_is_refused_when_the_configuration_loads(tmp_path, policy, contract_edit, key, says):
    root = write_config(tmp_path / "config", composite_files(policy, contract_edit or ("", "")))
    with pytest.raises(ConfigError) as info:
        load_config(root)
    text = str(info.value)
    assert "\n" not in text and "meter_readings_v1.yaml" in text and f"key {key!r}" in text and says in text, text
