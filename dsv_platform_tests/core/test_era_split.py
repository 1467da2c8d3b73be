"""``era-split/1`` (issue 27 item 6): whole serving-policy eras per split; an unlisted or null era is an error naming it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.era_split import EraSplitPolicy
from dsv_platform.core.splits.policy import assign, policy_from_config, policy_from_document

RAW = {"policy": "era-split/1", "column": "era", "eras": {"train": ["rules-1", "rules-2"], "validation": [3], "test": ["rules-4"]}}


def _policy() -> EraSplitPolicy:
    policy = policy_from_config(RAW, identifier="id", file="d.yaml")
    assert isinstance(policy, EraSplitPolicy)
    return policy


def test_each_example_goes_to_the_split_its_era_is_listed_under_and_the_check_holds_it() -> None:
    policy = _policy()
    eras = {"train": ["rules-1", "rules-2"], "validation": ["3"], "test": ["rules-4"]}
    assert policy.to_document() == {"policy": "era-split/1", "column": "era", "eras": eras}
    assert policy_from_document(policy.to_document()) == policy and policy.grouped_by == "era"
    rows = pa.table({"id": ["a", "b", "c", "d"], "era": ["rules-2", "3", "rules-4", "rules-1"]})
    assigned = assign(rows, policy)
    assert assigned["split"].to_pylist() == ["train", "validation", "test", "train"]
    (check,) = policy.checks(assigned)
    assert check.name == "eras_respected" and check.blocking and check.report.passed
    tampered = assigned.set_column(assigned.schema.get_field_index("split"), "split", pa.array(["test", "validation", "test", "train"]))
    (check,) = policy.checks(tampered)
    [failed] = check.report.failed()
    assert failed.name == "eras_respected[test]" and failed.detail["violations"] == 1 and failed.detail["first_violation_era"] == "rules-2"


@pytest.mark.parametrize(("eras", "says"), [(["rules-1", "rules-9"], r"\['rules-9'\] in no split"), (["rules-1", None], "holds 1 nulls")])
def test_an_unlisted_or_null_era_fails_naming_the_column_and_values(eras: list[str | None], says: str) -> None:
    with pytest.raises(SplitPolicyError, match=f"era column 'era'.*{says}" if "nulls" not in says else says):
        assign(pa.table({"id": [str(i) for i in range(len(eras))], "era": pa.array(eras, pa.string())}), _policy())


@pytest.mark.parametrize(
    ("eras", "says"),
    [
        ({"train": ["r1"], "test": ["r1"]}, "era 'r1' is in both 'train' and 'test'"),
        ({"train": []}, "eras.train: takes no era"),
        ({"train": "r1"}, "eras.train: must be a list"),
        (["r1"], "eras must map each split"),
        ({"1train": ["r1"]}, "is not a split name"),
    ],
)
def test_a_malformed_eras_mapping_is_a_config_error_naming_the_key(eras: object, says: str) -> None:
    with pytest.raises(ConfigError, match=r"split_policy\.eras") as caught:
        policy_from_config({**RAW, "eras": eras}, identifier="id", file="d.yaml")
    assert says in str(caught.value)
