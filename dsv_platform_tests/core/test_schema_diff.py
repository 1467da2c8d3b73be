"""The schema-evolution classifier: every change kind, the widening/narrowing boundaries, consumer verdicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.contracts.schema_diff import (
    ChangeKind,
    Consumer,
    ConsumerBreakError,
    diff_contracts,
    refuse_breaking,
)
from dsv_platform.core.errors import ContractError
from dsv_platform.core.publication.records import DefinitionConflictError

K = ChangeKind
METERS: dict[str, Any] = {
    "name": "meter_readings",
    "key": ["reading_id"],
    "partition_by": "read_day",
    "columns": [
        {"name": "reading_id", "type": "string"},
        {"name": "meter_id", "type": "string"},
        {"name": "read_day", "type": "date"},
        {"name": "read_at", "type": "timestamp", "resolution": "ms"},
        {"name": "kwh", "type": "decimal", "precision": 12, "scale": 3, "unit": "kWh", "range": {"min": 0, "max": 10000}},
        {"name": "pulses", "type": "int32"},
        {"name": "voltage", "type": "float32", "scale": 2, "nullable": True},
        {"name": "tariff", "type": "string", "allowed_values": ["day", "night"], "description": "tariff band"},
    ],
}


def meters(**edits: dict[str, Any]) -> dict[str, Any]:
    """METERS with column ``name`` updated by ``edits[name]`` (a value None drops that key; ``{"_drop": True}`` drops the column)."""
    doc = copy.deepcopy(METERS)
    cols = []
    for col in doc["columns"]:
        edit = edits.get(col["name"], {})
        if edit.get("_drop"):
            continue
        col.update(edit)
        cols.append({k: v for k, v in col.items() if v is not None})
    doc["columns"] = cols
    return doc


def diff(new: dict[str, Any], consumers: tuple[Consumer, ...] = (), old: dict[str, Any] | None = None):
    return diff_contracts(parse_contract(old or METERS, source="old.yaml"), parse_contract(new, source="new.yaml"), consumers)


def only(new: dict[str, Any]) -> tuple[ChangeKind, Any, Any, bool]:
    changes = diff(new).changes
    assert len(changes) == 1, changes
    c = changes[0]
    return c.kind, c.old, c.new, c.breaking


def test_identical_contracts_are_compatible_with_no_changes() -> None:
    d = diff(copy.deepcopy(METERS))
    assert d.changes == () and d.verdict == "compatible"
    assert d.to_document() == {"verdict": "compatible", "changes": [], "consumers": []}


@pytest.mark.parametrize(
    ("column", "edit", "kind", "old", "new"),
    [
        ("pulses", {"type": "int64"}, K.WIDENING, "int32", "int64"),
        ("pulses", {"type": "int16"}, K.NARROWING, "int32", "int16"),
        ("pulses", {"type": "uint32"}, K.NARROWING, "int32", "uint32"),  # negatives do not fit
        ("voltage", {"type": "float64"}, K.WIDENING, "float32(scale 2)", "float64(scale 2)"),
        ("voltage", {"scale": 4}, K.WIDENING, "float32(scale 2)", "float32(scale 4)"),
        ("voltage", {"scale": 1}, K.NARROWING, "float32(scale 2)", "float32(scale 1)"),
        ("voltage", {"type": "float64", "scale": 1}, K.NARROWING, "float32(scale 2)", "float64(scale 1)"),
        ("kwh", {"precision": 14}, K.WIDENING, "decimal(12,3)", "decimal(14,3)"),
        ("kwh", {"precision": 11}, K.NARROWING, "decimal(12,3)", "decimal(11,3)"),
        ("kwh", {"precision": 13, "scale": 4}, K.WIDENING, "decimal(12,3)", "decimal(13,4)"),  # 9 integer digits kept
        ("kwh", {"scale": 4}, K.NARROWING, "decimal(12,3)", "decimal(12,4)"),  # 9 -> 8 integer digits
        ("kwh", {"scale": 2}, K.NARROWING, "decimal(12,3)", "decimal(12,2)"),
        ("read_at", {"resolution": "us"}, K.WIDENING, "timestamp[ms]", "timestamp[us]"),
        ("read_at", {"resolution": "ns"}, K.NARROWING, "timestamp[ms]", "timestamp[ns]"),  # ns spans only 1677..2262
        ("read_at", {"resolution": "s"}, K.NARROWING, "timestamp[ms]", "timestamp[s]"),
        ("pulses", {"type": "string"}, K.TYPE_CHANGE, "int32", "string"),
        ("read_day", {"type": "timestamp", "resolution": "us"}, K.TYPE_CHANGE, "date", "timestamp[us]"),
    ],
)
def test_type_changes_widen_narrow_or_change(column: str, edit: dict[str, Any], kind: ChangeKind, old: str, new: str) -> None:
    assert only(meters(**{column: edit})) == (kind, old, new, kind is not K.WIDENING)


@pytest.mark.parametrize(
    ("old_type", "new_type", "kind"),
    [("uint16", "int32", K.WIDENING), ("uint32", "int32", K.NARROWING), ("uint8", "uint64", K.WIDENING), ("int8", "int64", K.WIDENING)],
)
def test_integer_boundaries(old_type: str, new_type: str, kind: ChangeKind) -> None:
    old = meters(pulses={"type": old_type})
    changes = diff(meters(pulses={"type": new_type}), old=old).changes
    assert [(c.kind, c.breaking) for c in changes] == [(kind, kind is not K.WIDENING)]


def test_new_columns_nullable_additive_is_compatible_required_is_breaking() -> None:
    doc = copy.deepcopy(METERS)
    doc["columns"].append({"name": "site", "type": "string", "nullable": True})
    assert only(doc) == (K.ADDITIVE, None, "string", False)
    doc["columns"][-1] = {"name": "site", "type": "string"}
    assert only(doc) == (K.ADDITIVE, None, "string", True)


def test_removal_unit_nullability_and_key_changes() -> None:
    assert only(meters(tariff={"_drop": True})) == (K.REMOVAL, "string", None, True)
    assert only(meters(kwh={"unit": "Wh"})) == (K.UNIT_CHANGE, "kWh", "Wh", True)
    assert only(meters(pulses={"nullable": True})) == (K.NULLABILITY, "required", "nullable", True)
    assert only(meters(voltage={"nullable": None})) == (K.NULLABILITY, "nullable", "required", False)
    rekeyed = copy.deepcopy(METERS) | {"key": ["meter_id", "read_at"]}
    assert only(rekeyed) == (K.KEY_CHANGE, ["reading_id"], ["meter_id", "read_at"], True)


def test_semantic_changes_loosening_breaks_tightening_does_not() -> None:
    assert only(meters(tariff={"allowed_values": ["day", "night", "peak"]}))[3] is True
    assert diff(meters(tariff={"allowed_values": ["night", "day"]})).changes == ()  # the same set in another order
    assert only(meters(tariff={"allowed_values": ["day"]})) == (K.SEMANTIC, {"allowed_values": ["day", "night"]}, {"allowed_values": ["day"]}, False)
    assert only(meters(tariff={"allowed_values": None}))[::3] == (K.SEMANTIC, True)
    assert only(meters(kwh={"range": {"min": 0, "max": 20000}})) == (K.SEMANTIC, {"range": {"min": 0, "max": 10000}}, {"range": {"min": 0, "max": 20000}}, True)
    assert only(meters(kwh={"range": {"min": 1, "max": 10000}}))[3] is False
    assert only(meters(kwh={"range": {"max": 10000}}))[3] is True  # the lower bound was dropped
    assert only(meters(tariff={"description": "tariff band of the supplier"})) == (
        K.SEMANTIC,
        {"description": "tariff band"},
        {"description": "tariff band of the supplier"},
        False,
    )


def test_declared_rename_keeps_identity_and_the_other_changes_of_the_column() -> None:
    new = meters(kwh={"name": "energy", "renamed_from": "kwh", "unit": "MWh"})
    changes = diff(new).changes
    assert [(c.column, c.kind, c.old, c.new, c.breaking) for c in changes] == [
        ("kwh", K.RENAME, "kwh", "energy", True),
        ("kwh", K.UNIT_CHANGE, "kWh", "MWh", True),
    ]
    # without the declaration it is a removal and an addition
    undeclared = meters(kwh={"name": "energy"})
    assert [c.kind for c in diff(undeclared).changes] == [K.REMOVAL, K.ADDITIVE]


def test_renaming_a_key_column_is_a_rename_not_a_key_change() -> None:
    new = meters(reading_id={"name": "id", "renamed_from": "reading_id"}) | {"key": ["id"]}
    assert [c.kind for c in diff(new).changes] == [K.RENAME]


def test_renamed_from_mistakes_are_one_line_contract_errors() -> None:
    with pytest.raises(ContractError, match=r"new.yaml: column 'energy': 'renamed_from: kwhh' names no column of old.yaml"):
        diff(meters(kwh={"name": "energy", "renamed_from": "kwhh"}))
    doc = copy.deepcopy(METERS)
    doc["columns"].append({"name": "energy", "type": "int64", "renamed_from": "kwh"})
    with pytest.raises(ContractError, match="still declares"):
        diff(doc)
    with pytest.raises(ContractError, match="previous name"):
        parse_contract(meters(kwh={"renamed_from": "kwh"}))


def test_renamed_from_does_not_enter_the_schema_hash_and_round_trips() -> None:
    plain = parse_contract(meters(kwh={"name": "energy"}))
    declared = parse_contract(meters(kwh={"name": "energy", "renamed_from": "kwh"}))
    assert plain.schema_hash == declared.schema_hash
    assert parse_contract(declared.to_document()).columns[4].renamed_from == "kwh"
    assert "renamed_from" not in str(parse_contract(METERS).to_document())


def test_consumer_verdicts_count_only_the_columns_they_read() -> None:
    billing = Consumer("billing", ("reading_id", "kwh"))
    ops = Consumer("ops_dashboard", ("meter_id", "voltage"))
    d = diff(meters(kwh={"unit": "Wh"}, voltage={"type": "float64"}), (billing, ops))
    assert d.verdict == "breaking"
    by_name = {v.name: v for v in d.consumers}
    assert by_name["billing"].verdict == "breaking" and [c.kind for c in by_name["billing"].broken_by] == [K.UNIT_CHANGE]
    assert by_name["ops_dashboard"].verdict == "compatible"
    assert d.to_document()["consumers"] == [
        {"name": "billing", "verdict": "breaking", "columns": ["reading_id", "kwh"]},
        {"name": "ops_dashboard", "verdict": "compatible", "columns": ["meter_id", "voltage"]},
    ]
    rekeyed = diff(copy.deepcopy(METERS) | {"key": ["meter_id", "read_at"]}, (ops,))
    assert rekeyed.consumers[0].verdict == "breaking"  # the grain changed for every reader


def test_refuse_breaking_names_consumer_column_and_kind() -> None:
    d = diff(meters(kwh={"unit": "Wh"}), (Consumer("ops", ("meter_id",)), Consumer("billing", ("kwh",))))
    with pytest.raises(ConsumerBreakError, match=r"meter_readings:v1: .*consumer 'billing': column 'kwh' unit_change kWh -> Wh") as caught:
        refuse_breaking(d, definition="meter_readings:v1")
    assert isinstance(caught.value, DefinitionConflictError) and caught.value.exit_code == 17
    refuse_breaking(diff(meters(kwh={"unit": "Wh"}), (Consumer("ops", ("meter_id",)),)), definition="meter_readings:v1")
