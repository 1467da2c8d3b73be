"""Split policies: hash-split/1 against the spec's reference formula, documents, assignment, checks."""

from __future__ import annotations

import hashlib
import json
import random
import unicodedata
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.group_split import GroupSplitPolicy
from dsv_platform.core.splits.hash_split import HashSplitPolicy
from dsv_platform.core.splits.policy import assign, policy_from_document
from dsv_platform.core.splits.seeded_random import SeededRandomSplitPolicy
from dsv_platform.core.splits.split_checks import (
    assignment_hash,
    expected_parts,
    proportions_within_tolerance,
    splits_are_entity_disjoint,
    time_boundaries_respected,
)
from dsv_platform.core.splits.split_common import SplitRange, parse_bounds
from dsv_platform.core.splits.time_split import TimeSplitPolicy

SALT = "fraud_v6"
POLICY = HashSplitPolicy.from_bounds(SALT, "train=80,validation=90,test=100")


def reference_bucket(identifier: str | int, salt: str = SALT, modulus: int = 100) -> int:
    """The spec's formula, verbatim."""
    return int(hashlib.sha256(f"{salt}:{identifier}".encode()).hexdigest(), 16) % modulus


def reference_split(bucket: int) -> str:
    return "train" if bucket < 80 else "validation" if bucket < 90 else "test"


nfc_text = st.text().map(lambda s: unicodedata.normalize("NFC", s))
identifiers = st.one_of(nfc_text, st.integers(), st.integers(min_value=-(2**63), max_value=2**64 - 1))


# --- hash-split/1 against the reference formula -------------------------------------------------


@settings(max_examples=300)
@given(st.lists(nfc_text, max_size=50), st.sampled_from([SALT, "s", "é-salt", "a:b"]))
def test_hash_split_agrees_with_reference_for_nfc_strings(ids: list[str], salt: str) -> None:
    policy = HashSplitPolicy.from_bounds(salt, "train=80,validation=90,test=100")
    result = policy.assign_values(pa.array(ids, pa.string()))
    expected = [reference_bucket(i, salt) for i in ids]
    assert result.buckets is not None
    assert result.buckets.to_pylist() == expected
    assert result.splits.cast(pa.string()).to_pylist() == [reference_split(b) for b in expected]
    assert [policy.bucket_of(i) for i in ids] == expected


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=50))
def test_hash_split_agrees_with_reference_for_int64(ids: list[int]) -> None:
    assert POLICY.buckets(pa.array(ids, pa.int64())).tolist() == [reference_bucket(i) for i in ids]


@given(st.lists(identifiers, max_size=30))
def test_hash_split_python_sequences_match_scalar_path(ids: list[str | int]) -> None:
    assert POLICY.buckets(ids).tolist() == [POLICY.bucket_of(i) for i in ids]
    assert [POLICY.bucket_of(i) for i in ids] == [reference_bucket(i) for i in ids]


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=30), st.sampled_from([2, 7, 97, 1000, 2**31 - 1, 2**31]))
def test_hash_split_uint64_and_large_moduli_match_reference(ids: list[int], modulus: int) -> None:
    policy = HashSplitPolicy("m", (SplitRange("a", modulus // 2 or 1), SplitRange("b", modulus)) if modulus > 1 else (), modulus)
    assert policy.buckets(pa.array(ids, pa.uint64())).tolist() == [reference_bucket(i, "m", modulus) for i in ids]


@given(st.lists(st.text(), max_size=30))
def test_hash_split_nfd_input_normalizes_to_the_nfc_split(ids: list[str]) -> None:
    nfd = [unicodedata.normalize("NFD", i) for i in ids]
    nfc = [unicodedata.normalize("NFC", i) for i in ids]
    assert POLICY.buckets(pa.array(nfd)).tolist() == [reference_bucket(i) for i in nfc]
    assert [POLICY.split_of(i) for i in nfd] == [POLICY.split_of(i) for i in nfc]


def test_hash_split_golden_vectors() -> None:
    # Computed once with the reference formula and pinned: a change here breaks every manifest.
    ids = ["user_1", "user_2", "ü", "", 12345, -7, "Amélie"]
    assert POLICY.buckets(ids).tolist() == [reference_bucket(i) for i in ids]
    assert POLICY.buckets(["user_1", "user_2", "ü", "", "last"]).tolist() == [79, 71, 72, 2, 74]
    assert POLICY.split_of(unicodedata.normalize("NFD", "Amélie")) == POLICY.split_of("Amélie")


def test_hash_split_accepts_chunked_dictionary_large_and_numpy_inputs() -> None:
    ids = [f"id-{i}" for i in range(1000)] + ["ñ", "ñ"]
    expected = [reference_bucket(unicodedata.normalize("NFC", i)) for i in ids]
    chunked = pa.chunked_array([pa.array(ids[:500]), pa.array(ids[500:])])
    for values in (chunked, pa.array(ids).dictionary_encode(), pa.array(ids, pa.large_string()), np.array(ids, dtype=object)):
        assert POLICY.buckets(values).tolist() == expected
    assert POLICY.buckets(np.arange(10)).tolist() == [reference_bucket(i) for i in range(10)]


def test_hash_split_batches_agree_across_batch_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    import dsv_platform.core.splits.hash_split as hash_split

    monkeypatch.setattr(hash_split, "BATCH_ROWS", 7)
    ids = [f"x{i}é" for i in range(50)]
    assert POLICY.buckets(pa.array(ids)).tolist() == [reference_bucket(i) for i in ids]


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ([1.5], "1.5"),
        ([True], "True"),
        ([b"raw"], "b'raw'"),
        ([date(2026, 1, 1)], "2026"),
        (["ok", 2.5], "2.5"),
        (["ok", None], "row 1"),
        (pa.array(["a", None, "b"]), "row 1"),
        (pa.array([1.0, 2.0]), "double"),
    ],
)
def test_hash_split_rejects_non_string_non_int_identifiers(values: object, named: str) -> None:
    with pytest.raises(SplitPolicyError, match=named.replace(".", r"\.").replace("(", r"\(")):
        POLICY.buckets(values)


@pytest.mark.parametrize("value", [1.0, True, None, b"x", (1,)])
def test_hash_split_scalar_rejects_other_types(value: object) -> None:
    with pytest.raises(SplitPolicyError, match=type(value).__name__):
        POLICY.bucket_of(value)  # type: ignore[arg-type]


# --- policy validation and documents ----------------------------------------------------------


@pytest.mark.parametrize(
    ("bounds", "modulus", "named"),
    [
        ("train=80,validation=90,test=99", 100, "test=99"),
        ("train=80,validation=80,test=100", 100, "validation=80"),
        ("train=90,validation=80,test=100", 100, "validation=80"),
        ("train=80,train=100", 100, "'train'"),
        ("train=80,=100", 100, "''"),
        ("train=80,test", 100, "'test'"),
        ("train=80,test=1e2", 100, "test=1e2"),
        ("train=0,test=100", 100, "train=0"),
        ("train=80,te st=100", 100, "te st"),
        ("train=80,test=100", 0, "modulus 0"),
        ("train=80,test=100", 2**31 + 1, "modulus"),
    ],
)
def test_hash_split_policy_rejects_bad_bounds(bounds: str, modulus: int, named: str) -> None:
    with pytest.raises(SplitPolicyError, match=named):
        HashSplitPolicy.from_bounds(SALT, bounds, modulus)


def test_hash_split_policy_rejects_empty_salt() -> None:
    with pytest.raises(SplitPolicyError, match="salt ''"):
        HashSplitPolicy.from_bounds("", "a=100")


def test_parse_bounds_reads_ordered_ranges() -> None:
    assert parse_bounds("train=80, validation=90,test=100") == (
        SplitRange("train", 80),
        SplitRange("validation", 90),
        SplitRange("test", 100),
    )


TIME_POLICY = TimeSplitPolicy("event_time", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00+00:00")  # type: ignore[arg-type]
GROUP_POLICY = GroupSplitPolicy("customer_id", POLICY)
RANDOM_POLICY = SeededRandomSplitPolicy.from_parts(42, {"train": 8, "validation": 1, "test": 1})


HASH_DOCUMENT = (
    b'{"algorithm":"sha256","identifier_encoding":"str:nfc-utf8,int:base10-ascii","modulus":100,'
    b'"policy":"hash-split/1","salt":"fraud_v6","splits":[{"name":"train","upper":80},'
    b'{"name":"validation","upper":90},{"name":"test","upper":100}]}'
)
GOLDEN_DOCUMENTS = {
    "hash": (POLICY, HASH_DOCUMENT),
    "group": (GROUP_POLICY, b'{"group_column":"customer_id","hash_split":' + HASH_DOCUMENT + b',"policy":"group-split/1"}'),
    "time": (TIME_POLICY, b'{"column":"event_time","policy":"time-split/1","train_until":"2026-01-01T00:00:00Z","validation_until":"2026-02-01T00:00:00Z"}'),
    "random": (
        RANDOM_POLICY,
        b'{"algorithm":"sha256","key_column":null,"parts":[{"name":"train","parts":8},{"name":"validation","parts":1},'
        b'{"name":"test","parts":1}],"policy":"seeded-random/1","seed":42}',
    ),
}
"""Each policy's canonical document, spelled out (keys sorted, no spaces: docs/canonical-encoding.md); its hash is
the SHA-256 of exactly these bytes, derived here with hashlib rather than pasted."""


@pytest.mark.parametrize("name", sorted(GOLDEN_DOCUMENTS))
def test_policy_documents_golden_bytes_and_hashes(name: str) -> None:
    policy, golden = GOLDEN_DOCUMENTS[name]
    assert canonical_json.dumps(policy.to_document()) == golden  # type: ignore[attr-defined]
    assert policy.policy_hash == hashlib.sha256(golden).hexdigest()  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy", [POLICY, GROUP_POLICY, TIME_POLICY, RANDOM_POLICY], ids=lambda p: type(p).__name__)
def test_policy_document_round_trips(policy: object) -> None:
    doc = policy.to_document()  # type: ignore[attr-defined]
    again = policy_from_document(json.loads(canonical_json.dumps(doc)))
    assert again == policy
    assert again.policy_hash == policy.policy_hash  # type: ignore[attr-defined]
    assert type(policy).from_document(doc) == policy  # type: ignore[attr-defined]


@settings(max_examples=50)
@given(
    st.text(min_size=1),
    st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=5),
)
def test_hash_split_document_round_trips_for_any_salt_and_bounds(salt: str, widths: list[int]) -> None:
    uppers = np.cumsum(widths).tolist()
    policy = HashSplitPolicy(salt, tuple(SplitRange(f"s{i}", int(u)) for i, u in enumerate(uppers)), int(uppers[-1]))
    assert HashSplitPolicy.from_document(policy.to_document()) == policy


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({"policy": "nope/1"}, "'nope/1'"),
        ({**POLICY.to_document(), "extra": 1}, "extra"),
        ({**POLICY.to_document(), "algorithm": "md5"}, "md5"),
        ({**POLICY.to_document(), "modulus": "100"}, "'100'"),
        ({**POLICY.to_document(), "splits": [{"name": "train"}]}, "name, upper"),
        ({**TIME_POLICY.to_document(), "train_until": "2026-01-01T00:00:00"}, "timezone-aware"),
        ({**TIME_POLICY.to_document(), "train_until": "yesterday"}, "yesterday"),
        ({**RANDOM_POLICY.to_document(), "seed": -1}, "seed -1"),
        ({**RANDOM_POLICY.to_document(), "parts": [{"name": "train", "parts": 0}]}, "positive"),
        ("hash-split/1", "unknown split policy"),
    ],
)
def test_policy_from_document_rejects_malformed_documents(doc: object, named: str) -> None:
    with pytest.raises(SplitPolicyError, match=named):
        policy_from_document(doc)


def test_time_policy_rejects_bounds_out_of_order() -> None:
    with pytest.raises(SplitPolicyError, match="before train_until"):
        TimeSplitPolicy("t", "2026-02-01T00:00:00Z", "2026-01-01T00:00:00Z")  # type: ignore[arg-type]


# --- assignment --------------------------------------------------------------------------------


def test_assign_hash_adds_split_and_bucket_columns() -> None:
    table = pa.table({"user_id": ["user_1", "user_2", "ü"], "x": [1, 2, 3]})
    out = assign(table, POLICY, "user_id")
    assert out.column_names == ["user_id", "x", "split", "bucket"]
    assert out["bucket"].to_pylist() == [79, 71, 72]
    assert out["split"].to_pylist() == ["train", "train", "train"]
    assert out["split"].type == pa.string()


def test_assign_errors_name_the_problem() -> None:
    table = pa.table({"user_id": ["a"], "split": ["train"]})
    with pytest.raises(SplitPolicyError, match="id_column"):
        assign(table, POLICY)
    with pytest.raises(SplitPolicyError, match="'nope'"):
        assign(table, POLICY, "nope", split_column="s")
    with pytest.raises(SplitPolicyError, match="already has a column 'split'"):
        assign(table, POLICY, "user_id")
    with pytest.raises(SplitPolicyError, match="'user_id' differs"):
        assign(table, GROUP_POLICY, "user_id", split_column="s")


def test_group_split_keeps_groups_together_and_equals_hash_of_group_key() -> None:
    rng = random.Random(7)
    customers = [f"c{rng.randrange(200)}" for _ in range(3000)]
    table = pa.table({"customer_id": customers, "row": list(range(3000))})
    out = assign(table, GROUP_POLICY)
    assert out["bucket"].to_pylist() == [reference_bucket(c) for c in customers]
    assert splits_are_entity_disjoint(out, "customer_id").passed


def _times(values: list[datetime], unit: str = "us") -> pa.Array:
    return pa.array(values, pa.timestamp(unit, tz="UTC"))


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_time_split_boundaries_are_half_open(unit: str) -> None:
    jan, feb = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    second = timedelta(seconds=1)
    times = [datetime(1969, 6, 1, tzinfo=UTC), jan - second, jan, feb - second, feb, feb + second]
    out = assign(pa.table({"event_time": _times(times, unit)}), TIME_POLICY)
    assert out["split"].to_pylist() == ["train", "train", "validation", "validation", "test", "test"]
    assert "bucket" not in out.column_names


def test_time_split_sub_unit_bound_rounds_correctly() -> None:
    policy = TimeSplitPolicy("t", "2026-01-01T00:00:00.500000Z", "2026-01-01T00:00:02Z")  # type: ignore[arg-type]
    t = datetime(2026, 1, 1, tzinfo=UTC)
    seconds = _times([t, t + timedelta(seconds=1)], "s")
    assert policy.assign_values(seconds).splits.cast(pa.string()).to_pylist() == ["train", "validation"]


def test_time_split_rejects_naive_and_null_times() -> None:
    with pytest.raises(SplitPolicyError, match="timezone-aware"):
        TIME_POLICY.assign_values(pa.array([datetime(2026, 1, 1)], pa.timestamp("us")))
    with pytest.raises(SplitPolicyError, match="1 null"):
        TIME_POLICY.assign_values(pa.array([None], pa.timestamp("us", tz="UTC")))


def test_seeded_random_is_counter_based_and_deterministic() -> None:
    table = pa.table({"v": list(range(20000))})
    out = assign(table, RANDOM_POLICY)
    expected = [reference_bucket(i, "seeded-random/1:42", 10) for i in range(20000)]
    assert out["bucket"].to_pylist() == expected
    report = proportions_within_tolerance(out, expected_parts(RANDOM_POLICY), tolerance_bp=100)
    assert report.passed, report.to_document()
    other_seed = assign(table, SeededRandomSplitPolicy.from_parts(43, {"train": 8, "validation": 1, "test": 1}))
    assert other_seed["bucket"].to_pylist() != expected


def test_seeded_random_key_column_ignores_row_order() -> None:
    policy = SeededRandomSplitPolicy.from_parts(1, {"a": 1, "b": 1}, key_column="k")
    keys = [f"k{i}" for i in range(100)]
    out = assign(pa.table({"k": keys}), policy)
    reversed_out = assign(pa.table({"k": keys[::-1]}), policy)
    assert assignment_hash(out, "k") == assignment_hash(reversed_out, "k")


# --- invariant checks --------------------------------------------------------------------------


def test_entity_disjointness_names_a_leaked_entity() -> None:
    table = pa.table({"customer_id": ["a", "b", "b", "c", "c"], "split": ["train", "train", "test", "test", "test"]})
    report = splits_are_entity_disjoint(table, "customer_id")
    assert not report.passed
    (finding,) = report.failed()
    assert finding.detail["leaked_entities"] == 1
    assert finding.detail["entities"] == 3
    assert "'b' in ['test', 'train']" in str(finding.detail["examples"])
    canonical_json.dumps(report.to_document())


def test_time_boundaries_check_catches_a_row_in_the_wrong_split() -> None:
    times = [datetime(2025, 12, 1, tzinfo=UTC), datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)]
    good = assign(pa.table({"event_time": _times(times)}), TIME_POLICY)
    assert time_boundaries_respected(good, TIME_POLICY).passed
    bad = good.set_column(1, "split", pa.array(["train", "train", "test"]))
    report = time_boundaries_respected(bad, TIME_POLICY)
    assert not report.passed
    (finding,) = report.failed()
    assert finding.name == "time_boundaries_respected[train]"
    assert finding.detail["violations"] == 1
    assert finding.detail["first_violation_row"] == 1
    assert finding.detail["first_violation_time"] == "2026-01-05T00:00:00Z"
    unknown = good.set_column(1, "split", pa.array(["train", "holdout", "test"]))
    assert [f.name for f in time_boundaries_respected(unknown, TIME_POLICY).failed()] == ["time_boundaries_respected[holdout]"]


def test_proportions_check_catches_a_split_outside_tolerance() -> None:
    table = pa.table({"split": ["train"] * 85 + ["validation"] * 10 + ["test"] * 5})
    expected = expected_parts(POLICY)
    assert expected == {"train": 80, "validation": 10, "test": 10}
    report = proportions_within_tolerance(table, expected, tolerance_bp=400)
    assert [f.name for f in report.failed()] == ["proportion_within_tolerance[train]", "proportion_within_tolerance[test]"]
    train = report.findings[0]
    assert train.detail == {
        "rows": 100,
        "count": 85,
        "expected": "4/5",
        "observed": "17/20",
        "difference_bp_ceil": 500,
        "tolerance_bp": 400,
    }
    assert proportions_within_tolerance(table, expected, tolerance_bp=500).passed
    canonical_json.dumps(report.to_document())


def test_proportions_check_fails_unexpected_split_and_bad_tolerance() -> None:
    table = pa.table({"split": ["train", "other"]})
    report = proportions_within_tolerance(table, {"train": 1}, tolerance_bp=10000)
    assert [f.name for f in report.failed()] == ["proportion_within_tolerance[other]"]
    with pytest.raises(SplitPolicyError, match=r"tolerance_bp 0\.5"):
        proportions_within_tolerance(table, {"train": 1}, tolerance_bp=0.5)  # type: ignore[arg-type]


def test_hash_split_proportions_are_close_to_bounds_on_many_ids() -> None:
    out = assign(pa.table({"id": pa.array(np.arange(200_000))}), POLICY, "id")
    assert proportions_within_tolerance(out, expected_parts(POLICY), tolerance_bp=50).passed


# --- assignment hash ---------------------------------------------------------------------------


def test_assignment_hash_is_documented_text_and_order_independent() -> None:
    table = pa.table({"id": ["b", "a\tx", "c"], "split": ["test", "train", "train"]})
    text = b"a\\tx\ttrain\nb\ttest\nc\ttrain\n"
    assert assignment_hash(table, "id") == hashlib.sha256(text).hexdigest()
    shuffled = table.take([2, 0, 1])
    assert assignment_hash(shuffled, "id") == assignment_hash(table, "id")
    changed = table.set_column(1, "split", pa.array(["train", "train", "train"]))
    assert assignment_hash(changed, "id") != assignment_hash(table, "id")


def test_assignment_hash_sorts_integers_numerically_and_rejects_nulls() -> None:
    table = pa.table({"id": [10, 9, -1], "split": ["a", "b", "c"]})
    assert assignment_hash(table, "id") == hashlib.sha256(b"-1\tc\n9\tb\n10\ta\n").hexdigest()
    with pytest.raises(SplitPolicyError, match="1 nulls"):
        assignment_hash(pa.table({"id": ["a", None], "split": ["x", "y"]}), "id")


# --- published conformance vectors -------------------------------------------------------------

VECTORS_PATH = Path(__file__).resolve().parents[2] / "dsv_platform" / "conformance" / "vectors.json"


def _split_vectors() -> list[dict[str, Any]]:
    if not VECTORS_PATH.exists():
        return []
    document = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))
    return [v for v in document["vectors"] if v["kind"] == "hash-split/1"]


@pytest.mark.skipif(not VECTORS_PATH.exists(), reason="conformance vectors not generated yet")
@pytest.mark.parametrize("vector", _split_vectors(), ids=lambda v: v["id"])
def test_hash_split_matches_published_conformance_vectors(vector: dict[str, Any]) -> None:
    spec = vector["policy"]
    policy = HashSplitPolicy(spec["salt"], tuple(SplitRange(s["name"], s["upper"]) for s in spec["splits"]), spec["modulus"])
    expected = vector["expected"]
    if "error" in expected:
        with pytest.raises(SplitPolicyError):
            policy.buckets(vector["identifiers"])
        return
    result = policy.assign_values(vector["identifiers"])
    assert result.buckets is not None
    assert result.buckets.to_pylist() == expected["buckets"]
    assert result.splits.cast(pa.string()).to_pylist() == expected["splits"]
