"""The privacy-policy gates' verdicts and the contract's ``restricted`` mark (issue 27 item 9, second gate), on the fraud example's files."""

from __future__ import annotations

import pytest

from dsv_platform.core.config.source import parse_source
from dsv_platform.core.config_yaml import read_yaml
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.errors import ContractError
from dsv_platform.core.privacy.privacy import subject_key_hash
from dsv_platform.core.privacy.publication_gates import Request, coverage_key, restricted_columns, restricted_gate, subjects_gate
from dsv_platform_tests.scenarios.support import CONFIG_DIR, definition

TRANSACTIONS = CONFIG_DIR / "sources" / "transactions.yaml"


def _marked(column: str):  # type: ignore[no-untyped-def]
    """The transactions source with ``column`` marked restricted."""
    doc = read_yaml(TRANSACTIONS)
    doc["columns"] = [{**c, "restricted": True} if c["name"] == column else c for c in doc["columns"]]
    return parse_contract({k: doc[k] for k in ("name", "key", "columns", "partition_by")}, source=str(TRANSACTIONS))


def test_restricted_is_a_column_mark_outside_the_schema_hash_and_absent_from_unmarked_documents() -> None:
    plain = parse_source(read_yaml(TRANSACTIONS), file=TRANSACTIONS).contract
    marked = _marked("account_id")
    assert marked.column("account_id").restricted and not plain.column("account_id").restricted
    assert marked.schema_hash == plain.schema_hash, "marking a column restricted changes no schema hash"
    assert "restricted" not in str(plain.to_document()), "an unmarked contract's document is the bytes it always was"
    assert parse_contract(marked.to_document()).column("account_id").restricted, "the mark round-trips"
    doc = marked.to_document()
    doc["columns"][1]["restricted"] = "yes"
    with pytest.raises(ContractError, match="'restricted' must be true or false, got 'yes'"):
        parse_contract(doc, source="transactions.yaml")


def test_an_uncovered_restricted_output_column_blocks_naming_it_the_contract_and_the_fix() -> None:
    v6 = definition("v6")
    marked = restricted_columns(v6.contract, {"transactions": _marked("merchant_risk"), "chargebacks": _marked("note")})
    assert marked == {"merchant_risk": ("transactions",)}, "a restricted column the output does not carry (note) is no concern"
    blocked = restricted_gate(marked, (), file="fraud_training_set_v6.yaml")
    assert not blocked.passed and blocked.blocking and blocked.detail["column"] == "merchant_risk"
    assert blocked.detail["observed"] == "not covered: merchant_risk (restricted by transactions)"
    assert blocked.detail["fix"] == (
        "add `access: {restricted_columns: [merchant_risk]}` to fraud_training_set_v6.yaml (or drop the column from the contract), then `dsv build` again"
    )
    covered = restricted_gate(marked, ("merchant_risk",), file="fraud_training_set_v6.yaml")
    assert covered.passed and "fix" not in covered.detail
    assert restricted_gate({}, (), file="x").passed, "nothing restricted: the gate passes (on by default, nothing to declare)"


def test_coverage_enters_the_logical_key_only_when_a_restricted_column_is_output() -> None:
    marked = {"merchant_risk": ("transactions",)}
    assert coverage_key({}, ()) is None, "definitions without restricted output columns keep their keys"
    assert coverage_key(marked, ()) != coverage_key(marked, ("merchant_risk",)), "covering the column is a new logical version"
    assert coverage_key(marked, ("merchant_risk", "other")) == coverage_key(marked, ("merchant_risk",))


def test_the_subjects_gate_counts_subjects_under_deletion_and_never_names_one() -> None:
    salt = b"s" * 16
    alice, bob, carol = (subject_key_hash(salt, k) for k in ("acct-alice", "acct-bob", "acct-carol"))
    requests = [Request(alice, 3, False), Request(bob, 5, True), Request(carol, 2, True)]
    gate = subjects_gate({alice, bob, "someone-else"}, requests, read_generation=4, registry_generation=5)
    assert not gate.passed and gate.blocking
    assert (gate.detail["subjects"], gate.detail["pending"], gate.detail["applied_after_read"]) == (2, 1, 1)
    assert gate.detail["observed"] == "2 subject(s) under deletion in the output (1 pending, 1 applied after generation 4)"
    assert "dsv privacy reconcile" in str(gate.detail["fix"])
    text = str(gate.to_document())
    assert not any(h in text or k in text for h in (alice, bob) for k in ("acct-alice", "acct-bob")), "neither the key nor its hash is shown"
    clean = subjects_gate({"someone-else"}, requests, read_generation=5, registry_generation=5)
    assert clean.passed and clean.detail["subjects"] == 0 and "fix" not in clean.detail
