"""A definition's ``split_policy`` goes through the policy registry: every registered policy has a documented YAML shape
that loads, and a policy that cannot work for the definition is refused when the configuration loads, naming file and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.splits.policy import REGISTRY, policy_from_config, policy_from_document
from dsv_platform_tests.core.config_support import DATASET, write_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
GROUP = """\
split_policy:
  policy: group-split/1
  group_column: meter_id
  salt: meters
  bounds: "train=80,test=100"
"""
SHAPES = {  # one short form per registered policy, on the meters dataset
    "hash-split/1": {"policy": "hash-split/1", "salt": "meters", "bounds": "train=70,validation=85,test=100"},
    "group-split/1": {"policy": "group-split/1", "group_column": "meter_id", "salt": "meters", "bounds": "train=80,test=100"},
    "time-split/1": {"policy": "time-split/1", "column": "read_at", "train_until": "2026-01-02T06:00:00Z", "validation_until": "2026-01-03T12:00:00+01:00"},
    "seeded-random/1": {"policy": "seeded-random/1", "seed": 7, "parts": {"train": 8, "validation": 1, "test": 1}, "key_column": "reading_id"},
    "era-split/1": {"policy": "era-split/1", "column": "meter_id", "eras": {"train": ["m-A", "m-B"], "test": ["m-C"]}},
}


def with_policy(tmp_path: Path, policy: object, contract_edit: tuple[str, str] = ("", "")) -> Path:
    assert GROUP in DATASET
    text = DATASET.replace(GROUP, yaml.safe_dump({"split_policy": policy}, sort_keys=False))
    if contract_edit[0]:
        assert contract_edit[0] in text
        text = text.replace(*contract_edit)
    return write_config(tmp_path / "config", {"datasets/meter_readings_v1.yaml": text})


def documented_policies() -> list[dict]:
    blocks = re.findall(r"```yaml\n(split_policy:.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    return [yaml.safe_load(b)["split_policy"] for b in blocks]


def test_every_registered_policy_has_a_documented_example_that_loads():
    documented = documented_policies()
    assert sorted(d["policy"] for d in documented) == sorted(REGISTRY)
    for raw in documented:
        identifier = "transaction_id" if raw["policy"] == "group-split/1" else "reading_id"
        policy = policy_from_config(raw, identifier=identifier, file="configuration.md")
        assert policy_from_document(policy.to_document()) == policy


def test_every_tested_shape_is_a_registered_policy():
    assert set(SHAPES) == set(REGISTRY)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_short_form_loads_as_the_policy_document(tmp_path, name):
    (d,) = load_config(with_policy(tmp_path, SHAPES[name])).datasets
    policy = d.policy()
    assert policy.policy_name == name and d.split_policy == policy.to_document() == d.recipe()["split_policy"]
    expected_entity = {"group-split/1": "meter_id", "seeded-random/1": "reading_id", "era-split/1": "meter_id"}.get(name, "reading_id")
    assert d.entity_column == expected_entity


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_document_form_loads_the_same_policy(tmp_path, name):
    (short,) = load_config(with_policy(tmp_path / "short", SHAPES[name])).datasets
    (full,) = load_config(with_policy(tmp_path / "full", short.policy().to_document())).datasets
    assert full.split_policy == short.split_policy and full.recipe_hash == short.recipe_hash


def test_time_split_instants_are_normalized_to_utc(tmp_path):
    (d,) = load_config(with_policy(tmp_path, SHAPES["time-split/1"])).datasets
    assert d.split_policy is not None
    assert (d.split_policy["train_until"], d.split_policy["validation_until"]) == ("2026-01-02T06:00:00Z", "2026-01-03T11:00:00Z")


def test_seeded_random_key_column_defaults_to_the_example_id(tmp_path):
    raw = {k: v for k, v in SHAPES["seeded-random/1"].items() if k != "key_column"}
    (d,) = load_config(with_policy(tmp_path, raw)).datasets
    assert d.split_policy is not None and d.split_policy["key_column"] == "reading_id"


def test_a_legacy_seeded_document_without_key_column_still_loads_and_draws_by_row_position(tmp_path):
    doc = {**policy_from_config(SHAPES["seeded-random/1"], identifier="reading_id", file="x").to_document(), "key_column": None}
    (d,) = load_config(with_policy(tmp_path, doc)).datasets
    assert d.split_policy == doc and d.policy().column is None and d.entity_column == "reading_id"


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_policy_loads_on_a_composite_key(tmp_path, name):
    (d,) = load_config(with_policy(tmp_path, SHAPES[name], ("  key: [reading_id]", "  key: [reading_id, meter_id]"))).datasets
    assert d.contract.key == ("reading_id", "meter_id")
    expected_entity = {"group-split/1": "meter_id", "seeded-random/1": "reading_id", "era-split/1": "meter_id"}.get(name, "example_id")
    assert d.entity_column == expected_entity


TIME = SHAPES["time-split/1"]
HASH = SHAPES["hash-split/1"]
SEEDED = SHAPES["seeded-random/1"]
NULLABLE_READ_AT = ("{name: read_at, type: timestamp, resolution: us}", "{name: read_at, type: timestamp, resolution: us, nullable: true}")


@pytest.mark.parametrize(
    ("policy", "contract_edit", "key", "says"),
    [
        ({**TIME, "column": "voltage"}, None, "split_policy.column", "'voltage' is not a column of the output contract"),
        ({**TIME, "column": "read_day"}, None, "split_policy.column", "must be a timestamp column, it is date"),
        ({**TIME, "column": "kwh"}, None, "split_policy.column", "must be a timestamp column, it is decimal"),
        (TIME, NULLABLE_READ_AT, "split_policy.column", "is nullable"),
        ({**TIME, "train_until": "2026-01-02T06:00:00"}, None, "split_policy.train_until", "timezone-aware"),
        ({**TIME, "validation_until": "2026-01-01T00:00:00Z"}, None, "split_policy.validation_until", "before train_until"),
        ({k: v for k, v in TIME.items() if k != "validation_until"}, None, "split_policy.validation_until", "is required"),
        ({**TIME, "bounds": "train=1,test=2"}, None, "split_policy.bounds", "unknown key"),
        ({**HASH, "group_column": "meter_id"}, None, "split_policy.group_column", "unknown key"),
        ({**HASH, "salt": "a:b"}, None, "split_policy.salt", "contains ':'"),
        ({**HASH, "bounds": "train=70,test=90"}, None, "split_policy.bounds", "must equal the modulus 100"),
        ({**HASH, "modulus": "100"}, None, "split_policy.modulus", "must be an integer"),
        ({**HASH, "policy": "hash-split/2"}, None, "split_policy.policy", "unknown split policy 'hash-split/2'"),
        ({k: v for k, v in HASH.items() if k != "policy"}, None, "split_policy.policy", "is required"),
        ({**TIME, "column": "example_id"}, ("  key: [reading_id]", "  key: [reading_id, meter_id]"), "split_policy.column", "composite example id"),
        (HASH, ("  key: [reading_id]", "  key: [kwh]"), "contract.key", "must be a string or integer column"),
        ({**SHAPES["group-split/1"], "group_column": "site"}, None, "split_policy.group_column", "'site' is not a column"),
        ({**SHAPES["group-split/1"], "group_column": "factor"}, None, "split_policy.group_column", "must be a string or integer column"),
        ({**SEEDED, "key_column": "factor"}, None, "split_policy.key_column", "must be a string or integer column"),
        ({**SEEDED, "parts": [8, 1, 1]}, None, "split_policy.parts", "must map split names"),
        ({**SEEDED, "parts": {"train": 0, "test": 1}}, None, "split_policy.parts", "positive integers"),
        ({**SEEDED, "seed": -1}, None, "split_policy.seed", "non-negative"),
    ],
)
def test_a_policy_that_cannot_work_is_refused_naming_file_and_key(tmp_path, policy, contract_edit, key, says):
    with pytest.raises(ConfigError) as info:
        load_config(with_policy(tmp_path, policy, contract_edit or ("", "")))
    text = str(info.value)
    assert "\n" not in text and "meter_readings_v1.yaml" in text and f"key {key!r}" in text and says in text, text
