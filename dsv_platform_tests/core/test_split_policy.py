"""The split-policy protocol and registry (core/splits/policy.py): every registered policy satisfies it, and a dataset's
assignment (assign_examples) is the one the build always made for the policies it could build."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dsv_platform.core.splits.era_split import EraSplitPolicy
from dsv_platform.core.splits.group_split import GroupSplitPolicy
from dsv_platform.core.splits.hash_split import HashSplitPolicy
from dsv_platform.core.splits.policy import REGISTRY, SplitPolicy, assign, assign_examples, dataset_column, policy_from_document
from dsv_platform.core.splits.seeded_random import SeededRandomSplitPolicy
from dsv_platform.core.splits.split_checks import expected_parts
from dsv_platform.core.splits.time_split import TimeSplitPolicy

HASH = HashSplitPolicy.from_bounds("s", "train=80,validation=90,test=100")
POLICIES: dict[str, SplitPolicy] = {
    "hash-split/1": HASH,
    "group-split/1": GroupSplitPolicy("account", HASH),
    "time-split/1": TimeSplitPolicy("at", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"),  # type: ignore[arg-type]
    "seeded-random/1": SeededRandomSplitPolicy.from_parts(3, {"train": 8, "test": 2}, "account"),
    "era-split/1": EraSplitPolicy("account", (("train", tuple(f"a{i}" for i in range(30))), ("test", tuple(f"a{i}" for i in range(30, 40))))),
}


def _examples(n: int = 400) -> pa.Table:
    rng = random.Random(5)
    return pa.table(
        {
            "id": pa.array(rng.sample(range(10**6), n), pa.int64()),
            "account": [f"a{rng.randrange(40)}" for _ in range(n)],
            "at": pa.array([1767225600_000000 + rng.randrange(3 * 86400) * 10**6 for _ in range(n)], pa.timestamp("us", tz="UTC")),
            "x": list(range(n)),
        }
    )


def test_the_registry_names_every_policy_by_its_document():
    assert set(REGISTRY) == set(POLICIES)
    for name, policy in POLICIES.items():
        assert REGISTRY[name] is type(policy) and policy.policy_name == name == policy.to_document()["policy"]
        assert policy_from_document(policy.to_document()) == policy


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_assign_examples_gives_every_example_one_split_and_stores_ids_entity_split_bucket(name):
    policy, examples = POLICIES[name], _examples()
    entity = policy.grouped_by or "id"
    checked, stored = assign_examples(examples, policy, "id", entity)
    assert checked.num_rows == stored.num_rows == examples.num_rows and stored["id"].to_pylist() == sorted(examples["id"].to_pylist())
    assert stored.column_names == list(dict.fromkeys(["id", entity])) + ["split"] + (["bucket"] if policy.assigns_buckets else [])
    assert set(stored["split"].to_pylist()) <= set(policy.names)
    column = dataset_column(policy, "id")
    assert column is not None and column in checked.column_names
    assert all(check.report.passed for check in policy.checks(checked))
    if policy.expected_parts() is not None:
        assert sum(expected_parts(policy).values()) > 0


def test_the_group_and_keyed_seeded_assignments_are_the_ones_builds_always_made():
    """Before the registry the build assigned ``examples.select([id, entity])`` with no id column, then sorted by id."""
    examples = _examples()
    for policy, entity in ((POLICIES["group-split/1"], "account"), (SeededRandomSplitPolicy.from_parts(3, {"train": 8, "test": 2}, "id"), "id")):
        _, stored = assign_examples(examples, policy, "id", entity)
        assert stored.equals(assign(examples.select(list(dict.fromkeys(["id", entity]))), policy).sort_by("id"))


def test_a_legacy_seeded_draw_by_row_position_is_unchanged():
    policy = SeededRandomSplitPolicy.from_parts(3, {"train": 8, "test": 2})  # key_column None
    examples = _examples()
    assert dataset_column(policy, "id") is None
    _, stored = assign_examples(examples, policy, "id", "id")
    assert stored.equals(assign(examples.select(["id"]), policy).sort_by("id"))


def test_a_time_split_is_checked_on_its_column_and_a_wrong_row_fails_the_gate():
    policy = POLICIES["time-split/1"]
    checked, stored = assign_examples(_examples(), policy, "id", "id")
    assert "at" in checked.column_names and "at" not in stored.column_names and policy.expected_parts() is None
    flipped = checked.set_column(checked.column_names.index("split"), "split", pa.array(["test"] * checked.num_rows))
    (check,) = policy.checks(flipped)
    assert check.name == "time_boundaries_respected" and check.blocking and not check.report.passed
