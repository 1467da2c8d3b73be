"""Contract parsing: valid documents round-trip; every malformed one names the file and the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dsv_platform.core.contracts.contract import LogicalType, load_contract, parse_contract
from dsv_platform.core.errors import ContractError

GOOD = """\
name: payments
key: [id, ts]
partition_by: day
owner: risk
columns:
  - {name: id, type: int64}
  - {name: ts, type: timestamp, resolution: ms}
  - {name: day, type: date}
  - {name: amount, type: decimal, precision: 12, scale: 2, unit: EUR, nullable: true}
  - {name: score, type: float32, scale: 4, nullable: true}
  - {name: note, type: string, nullable: true, allowed_values: [a, b]}
  - {name: raw, type: binary, nullable: true, range: {min: 0}}
"""


def write(tmp_path: Path, text: str, name: str = "contract.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_contract_load_parses_every_field(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, GOOD))
    assert contract.name == "payments" and contract.key == ("id", "ts") and contract.partition_by == "day"
    assert contract.column_names == ["id", "ts", "day", "amount", "score", "note", "raw"]
    amount = contract.column("amount")
    assert (amount.type, amount.precision, amount.scale, amount.unit, amount.nullable) == (LogicalType.DECIMAL, 12, 2, "EUR", True)
    assert contract.column("ts").arrow_type == pa.timestamp("ms", tz="UTC")
    assert contract.column("score").arrow_type == pa.float32()
    assert contract.arrow_schema.metadata[b"dsv.schema_hash"] == contract.schema_hash.encode()


def test_contract_to_document_round_trips(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, GOOD))
    again = parse_contract(contract.to_document())
    assert again == contract and again.schema_hash == contract.schema_hash


def test_contract_schema_hash_ignores_descriptions_and_owner(tmp_path: Path) -> None:
    base = load_contract(write(tmp_path, GOOD))
    doc = base.to_document()
    doc["description"] = "words"
    doc["owner"] = "someone else"
    doc["columns"][0]["description"] = "the id"
    assert parse_contract(doc).schema_hash == base.schema_hash


BAD: dict[str, tuple[str, str | None, str]] = {
    # name: (columns YAML replacing 'note', the column the message names, a word the message contains)
    "unknown-column-key": ("  - {name: note, type: string, colour: red}\n", "note", "colour"),
    "unknown-type": ("  - {name: note, type: varchar}\n", "note", "varchar"),
    "float-without-scale": ("  - {name: note, type: float64}\n", "note", "scale"),
    "decimal-without-precision": ("  - {name: note, type: decimal, scale: 2}\n", "note", "precision"),
    "decimal-without-scale": ("  - {name: note, type: decimal, precision: 5}\n", "note", "scale"),
    "scale-above-precision": ("  - {name: note, type: decimal, precision: 2, scale: 3}\n", "note", "scale"),
    "timestamp-without-resolution": ("  - {name: note, type: timestamp}\n", "note", "resolution"),
    "timestamp-bad-resolution": ("  - {name: note, type: timestamp, resolution: minutes}\n", "note", "minutes"),
    "scale-on-int": ("  - {name: note, type: int32, scale: 2}\n", "note", "scale"),
    "nullable-not-bool": ("  - {name: note, type: string, nullable: maybe}\n", "note", "nullable"),
    "duplicate-column": ("  - {name: id, type: string}\n", "id", "twice"),
}


@pytest.mark.parametrize(("column_yaml", "column", "word"), BAD.values(), ids=list(BAD))
def test_contract_error_names_file_and_column(tmp_path: Path, column_yaml: str, column: str, word: str) -> None:
    text = GOOD.replace("  - {name: note, type: string, nullable: true, allowed_values: [a, b]}\n", column_yaml)
    path = write(tmp_path, text, "bad-contract.yaml")
    with pytest.raises(ContractError) as info:
        load_contract(path)
    message = str(info.value)
    assert str(path) in message and f"column {column!r}" in message and word in message
    assert info.value.file == str(path) and info.value.column == column


DOC_ERRORS: dict[str, tuple[dict[str, Any], str | None, str]] = {
    "key-undeclared": ({"key": ["nope"]}, "nope", "not declared"),
    "key-float": ({"key": ["score"]}, "score", "float"),
    "key-nullable": ({"key": ["amount"]}, "amount", "nullable"),
    "partition-undeclared": ({"partition_by": "zone"}, "zone", "undeclared"),
    "unknown-contract-key": ({"colour": "red"}, None, "colour"),
    "key-missing": ({"key": []}, None, "key"),
    "columns-empty": ({"columns": []}, None, "columns"),
}


@pytest.mark.parametrize(("change", "column", "word"), DOC_ERRORS.values(), ids=list(DOC_ERRORS))
def test_contract_document_error_names_source_and_column(tmp_path: Path, change: dict[str, Any], column: str | None, word: str) -> None:
    doc = load_contract(write(tmp_path, GOOD)).to_document()
    doc.update(change)
    with pytest.raises(ContractError) as info:
        parse_contract(doc, source="contracts/payments.yaml")
    message = str(info.value)
    assert message.startswith("contracts/payments.yaml") and word in message
    if column is not None:
        assert f"column {column!r}" in message


def test_contract_unreadable_or_invalid_yaml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match=r"missing\.yaml"):
        load_contract(tmp_path / "missing.yaml")
    with pytest.raises(ContractError, match=r"broken\.yaml.*YAML"):
        load_contract(write(tmp_path, "name: [unclosed\n", "broken.yaml"))
    with pytest.raises(ContractError, match=r"list\.yaml.*mapping"):
        load_contract(write(tmp_path, "- a\n- b\n", "list.yaml"))
