"""The pure integrity signals (issue 16 part 5): each flags its poisoning pattern, passes clean data, and the policy parses strictly."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dsv_platform.core.config.dataset_definition import parse_definition
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.contracts.integrity_signals import (
    IntegrityPolicy,
    contributor_share,
    duplicate_clusters,
    exclusion_rules_changed,
    label_change_concentration,
    parse_integrity,
    top_share,
    unapproved_snapshot,
    unexpected_writer,
)
from dsv_platform_tests.scenarios.support import definition

POLICY = IntegrityPolicy(label_column="label", max_contributor_share=0.5, min_label_changes=3)


def test_unexpected_writer_names_the_batch_and_its_writer() -> None:
    writers = {"tx": {"b1@aa": "gateway", "b2@bb": "mallory", "b3@cc": None}, "other": {"x@dd": "anyone"}}
    gate = unexpected_writer(POLICY, writers, {"tx": ["gateway"], "other": []})
    assert not gate.passed and gate.detail["batches"] == 2
    assert gate.detail["found"] == "tx:b2@bb by mallory, tx:b3@cc by (unrecorded)"
    assert unexpected_writer(POLICY, {"tx": {"b1@aa": "gateway"}}, {"tx": ["gateway"]}).passed
    skipped = unexpected_writer(POLICY, writers, {"tx": []})
    assert skipped.passed and skipped.detail["evaluated"] is False


def test_a_snapshot_outside_the_approved_refs_is_flagged() -> None:
    gate = unapproved_snapshot(POLICY, {"tx": 7, "cb": 3}, {"tx": {1, 2, 5}})
    assert not gate.passed and gate.detail["outside"] == "tx@7" and gate.detail["checked"] == 1
    assert unapproved_snapshot(POLICY, {"tx": 5}, {"tx": {1, 2, 5}}).passed


def test_contributor_share_against_its_bound() -> None:
    assert top_share(pa.array(["a", "b", "a", None])) == ("a", 0.5, 2)
    assert contributor_share(POLICY, pa.array(["a", "b", "a", "b"]), by="writer").passed
    gate = contributor_share(POLICY, pa.array(["a", "a", "a", "b"]), by="writer")
    assert not gate.passed and gate.detail["top"] == "a" and gate.detail["share"] == "0.7500"
    assert contributor_share(IntegrityPolicy(), pa.array(["a"]), by="writer").detail["evaluated"] is False


def test_duplicate_clusters_are_identical_features_with_different_labels() -> None:
    rows = pa.table({"id": [1, 2, 3, 4, 5], "f": [1.0, 1.0, 2.0, 2.0, 3.0], "g": ["x", "x", "y", "y", None], "label": [True, False, True, True, False]})
    gate = duplicate_clusters(POLICY, rows, ["f", "g"], "label")
    assert not gate.passed and gate.detail["clusters"] == 1 and gate.detail["rows"] == 2
    assert duplicate_clusters(POLICY, rows.slice(2), ["f", "g"], "label").passed
    assert duplicate_clusters(IntegrityPolicy(), rows, ["f"], None).detail["evaluated"] is False


def test_label_changes_concentrated_in_one_contributor() -> None:
    baseline = pa.table({"id": [1, 2, 3, 4, 5, 6], "label": [False] * 6})
    spread = pa.table({"id": [1, 2, 3, 4, 5, 6], "label": [True, True, True, True, False, False], "who": ["a", "b", "c", "d", "a", "a"]})
    assert label_change_concentration(POLICY, spread, baseline, ["id"], "who").passed
    one = spread.set_column(2, "who", pa.array(["m", "m", "m", "a", "a", "a"]))
    gate = label_change_concentration(POLICY, one, baseline, ["id"], "who")
    assert not gate.passed and gate.detail["top"] == "m" and gate.detail["changes"] == 4
    few = IntegrityPolicy(label_column="label", min_label_changes=10)
    assert label_change_concentration(few, one, baseline, ["id"], "who").passed  # below the minimum: noise


def test_exclusion_rule_changes_between_versions_are_named() -> None:
    now = {"population_filter": "currency in [USD]", "label": "fraud:v6"}
    gate = exclusion_rules_changed(POLICY, now, {"population_filter": "currency in [USD, EUR]", "label": "fraud:v6"}, "ds:v5@sha256:" + "0" * 64)
    assert not gate.passed and gate.detail["changed"] == "population_filter"
    assert gate.detail["population_filter.before"] == "currency in [USD, EUR]"
    assert exclusion_rules_changed(POLICY, now, dict(now), "ds:v5").passed
    assert exclusion_rules_changed(POLICY, now, None, None).detail["evaluated"] is False


@pytest.mark.parametrize(
    ("block", "key"),
    [
        ({"blocking": ["no_such_signal"]}, "integrity.blocking"),
        ({"max_contributor_share_bp": 0.5}, "integrity.max_contributor_share_bp"),
        ({"max_label_change_share_bp": 10_001}, "integrity.max_label_change_share_bp"),
        ({"contributor_column": "nope"}, "integrity.contributor_column"),
        ({"label_column": "nope"}, "integrity.label_column"),
        ({"duplicate_columns": ["amount", "nope"]}, "integrity.duplicate_columns"),
        ({"min_label_changes": 0}, "integrity.min_label_changes"),
        ({"unknown": 1}, "integrity"),
    ],
)
def test_a_bad_integrity_block_names_the_file_and_key(block: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as info:
        parse_integrity(block, file="datasets/x.yaml", columns=("amount", "is_fraud"))
    assert "datasets/x.yaml" in str(info.value)


def test_shares_are_basis_points_and_a_batch_may_be_the_contributor() -> None:
    policy = parse_integrity({"max_contributor_share_bp": 3000, "contributor_column": "_batch"}, file="x.yaml", columns=("amount",))
    assert policy.max_contributor_share == 0.3 and policy.max_label_change_share == 0.5 and policy.contributor_column == "_batch"


def test_a_definition_declares_its_integrity_block() -> None:
    doc = dict(definition("v6").document) | {"integrity": {"blocking": ["unexpected_writer"], "label_column": "is_fraud"}}
    parsed = parse_definition(doc, source="fraud_training_set_v6.yaml")
    policy = parse_integrity(parsed.document["integrity"], file="x", columns=parsed.contract.column_names)
    assert policy.blocking == frozenset({"unexpected_writer"}) and policy.label_column == "is_fraud"
    with pytest.raises(ConfigError, match=r"fraud_training_set_v6\.yaml: key 'integrity\.blocking'"):
        parse_definition(dict(doc) | {"integrity": {"blocking": ["typo"]}}, source="fraud_training_set_v6.yaml")
