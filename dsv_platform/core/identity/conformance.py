"""Conformance vectors for `dsv-canon/1`, `hash-split/1` and composite example ids (docs/canonical-encoding.md).

A vector is plain JSON that any implementation can read, encode and compare:
:func:`build_vectors` computes the expected values with this package's encoder;
:func:`check_vectors` recomputes a document's vectors and lists every mismatch.

Details: docs/hashing.md
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core import canonical_json
from dsv_platform.core.contracts.contract import Contract, LogicalType, parse_contract
from dsv_platform.core.errors import DsvError, SplitPolicyError
from dsv_platform.core.identity.conformance_cases import EXAMPLE_ID_CASES, EXAMPLE_ID_KIND, ROW_CASES, SCHEMA_CASES, SPLIT_ALGORITHM, SPLIT_CASES
from dsv_platform.core.identity.example_id import EXAMPLE_ID, composite_ids
from dsv_platform.core.identity.hashing import canonical_bytes, hash_table, partition_keys
from dsv_platform.core.splits.split_checks import assignment_hash

FORMAT = "dsv-canon/1 conformance"
ENCODING = "dsv-canon/1"
NOTES = (
    "rows: typed JSON values (see dsv_platform/core/identity/conformance.py). "
    "expected.partitions[].lines: one entry per row without its LF; the partition text is every line + LF, "
    "its hash the SHA-256 of that UTF-8 text. hash-split vectors: bucket = int(sha256(salt:NFC(id))) % modulus. "
    "example-id vectors: example_ids in row order, then their hash-split buckets and splits and the assignment hash."
)


def _float(text: str) -> float:
    return float(text)  # accepts NaN, Infinity, -Infinity, -0.0 and exact decimal strings


def _column_array(values: list[Any], ltype: LogicalType, arrow_type: pa.DataType) -> pa.Array:
    if ltype is LogicalType.DECIMAL:
        return pa.array([None if v is None else Decimal(v) for v in values], arrow_type)
    if ltype.is_float:
        return pa.array([None if v is None else _float(v) for v in values], arrow_type)
    if ltype is LogicalType.DATE:
        return pa.array([None if v is None else dt.date.fromisoformat(v) for v in values], pa.date32())
    if ltype is LogicalType.BINARY:
        return pa.array([None if v is None else bytes.fromhex(v) for v in values], pa.binary())
    if ltype is LogicalType.TIMESTAMP:
        stamps = [v for v in values if v is not None]
        kinds = {(v["unit"], v["tz"]) for v in stamps} or {("us", "UTC")}
        if len(kinds) != 1:
            raise ValueError(f"a timestamp column's values must share one unit and time zone, got {sorted(kinds, key=str)}")
        unit, tz = kinds.pop()
        return pa.array([None if v is None else v["epoch"] for v in values], pa.timestamp(unit, tz=tz))
    return pa.array(values, arrow_type)


def table_from_rows(contract: Contract, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The Arrow table of a vector's typed JSON rows (columns no row mentions are left out)."""
    present = {name for row in rows for name in row} if rows else set(contract.column_names)
    arrays, names = [], []
    for col in contract.columns:
        if col.name in present:
            values = [row.get(col.name) for row in rows]
            arrays.append(_column_array(values, col.type, col.arrow_type))
            names.append(col.name)
    return pa.Table.from_arrays(arrays, names=names)


def _rows_expected(vector: Mapping[str, Any]) -> dict[str, Any]:
    try:
        contract = parse_contract(vector["contract"], source=f"vector {vector['id']}")
        table = table_from_rows(contract, vector["rows"])
        partition_by = vector.get("partition_by")
        digest = hash_table(table, contract, partition_by=partition_by)
        keys = partition_keys(table, contract, partition_by)
        partitions = []
        for leaf in digest.partitions:
            part = table.filter(pc.equal(keys, leaf.key)) if table.num_rows else table
            text = canonical_bytes(part, contract).decode("utf-8")
            partitions.append({"key": leaf.key, "rows": leaf.rows, "hash": leaf.hash, "lines": text.split("\n")[:-1]})
    except DsvError as exc:
        return {"error": type(exc).__name__, "mentions": [m for m in vector.get("mentions", []) if m in str(exc)]}
    return {"partitions": partitions, "content_hash": digest.content_hash, "schema_hash": digest.schema_hash}


def _schema_expected(vector: Mapping[str, Any]) -> dict[str, Any]:
    contract = parse_contract(vector["contract"], source=f"vector {vector['id']}")
    document = contract.schema_document()
    return {"schema_json": canonical_json.dumps(document).decode("utf-8"), "schema_hash": canonical_json.sha256_hex(document)}


def split_identifier_bytes(identifier: Any) -> bytes:
    """``hash-split/1`` identifier bytes, straight from the spec (no dependency on the splits module)."""
    if isinstance(identifier, str):
        return unicodedata.normalize("NFC", identifier).encode("utf-8")
    if isinstance(identifier, int) and not isinstance(identifier, bool):
        return str(identifier).encode("ascii")
    raise SplitPolicyError(f"identifier {identifier!r} is neither a string nor an integer")


def _split_expected(vector: Mapping[str, Any]) -> dict[str, Any]:
    policy = vector["policy"]
    salt, modulus = policy["salt"], policy["modulus"]
    try:
        raw = [split_identifier_bytes(i) for i in vector["identifiers"]]
    except SplitPolicyError as exc:
        return {"error": type(exc).__name__}
    buckets = [int(hashlib.sha256(salt.encode("utf-8") + b":" + b).hexdigest(), 16) % modulus for b in raw]
    splits = [next(s["name"] for s in policy["splits"] if bucket < s["upper"]) for bucket in buckets]
    return {"identifier_bytes": [b.hex() for b in raw], "buckets": buckets, "splits": splits}


def _example_id_expected(vector: Mapping[str, Any]) -> dict[str, Any]:
    try:
        contract = parse_contract(vector["contract"], source=f"vector {vector['id']}")
        ids = composite_ids(table_from_rows(contract, vector["rows"]), contract).to_pylist()
    except DsvError as exc:
        return {"error": type(exc).__name__}
    split = _split_expected({"policy": vector["policy"], "identifiers": ids})
    chosen = pa.table({EXAMPLE_ID: pa.array(ids, pa.string()), "split": pa.array(split["splits"], pa.string())})
    return {"example_ids": ids, **split, "assignment_hash": assignment_hash(chosen, EXAMPLE_ID)}


def expected_of(vector: Mapping[str, Any]) -> dict[str, Any]:
    """Recompute a vector's ``expected`` block with this package's code."""
    kind = vector["kind"]
    if kind == "rows":
        return _rows_expected(vector)
    if kind == "schema":
        return _schema_expected(vector)
    if kind == SPLIT_ALGORITHM:
        return _split_expected(vector)
    if kind == EXAMPLE_ID_KIND:
        return _example_id_expected(vector)
    raise ValueError(f"unknown vector kind {kind!r}")


def build_vectors() -> dict[str, Any]:
    """The conformance document: every case with its expected outputs."""
    vectors = []
    for case in (*ROW_CASES, *SCHEMA_CASES, *SPLIT_CASES, *EXAMPLE_ID_CASES):
        vectors.append({**case, "expected": expected_of(case)})
    ids = [v["id"] for v in vectors]
    if len(set(ids)) != len(ids):
        raise ValueError("conformance vector ids must be unique")
    return {"format": FORMAT, "encoding": ENCODING, "split_algorithm": SPLIT_ALGORITHM, "notes": NOTES, "vectors": vectors}


def dumps_vectors(doc: Mapping[str, Any]) -> str:
    """The shipped file's text: indented, ASCII only (non-ASCII and NFD strings as \\u escapes), LF at the end."""
    return json.dumps(doc, indent=1, ensure_ascii=True) + "\n"


def _diff(path: str, expected: Any, actual: Any, out: list[str]) -> None:
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                out.append(f"{path}.{key}: expected {expected[key]!r}, this code gives nothing")
            elif key not in expected:
                out.append(f"{path}.{key}: missing from the file; this code gives {actual[key]!r}")
            else:
                _diff(f"{path}.{key}", expected[key], actual[key], out)
    elif isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _diff(f"{path}[{i}]", e, a, out)
    elif expected != actual:
        out.append(f"{path}: file says {expected!r}, this code gives {actual!r}")


def check_vectors(doc: Any) -> list[str]:
    """Every mismatch between a conformance document and this code (empty when they agree)."""
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT or not isinstance(doc.get("vectors"), list):
        return [f"not a {FORMAT!r} document (needs 'format' and a 'vectors' list)"]
    failures: list[str] = []
    seen = set()
    for index, vector in enumerate(doc["vectors"]):
        name = vector.get("id", f"#{index}") if isinstance(vector, Mapping) else f"#{index}"
        seen.add(name)
        try:
            actual = expected_of(vector)
        except (KeyError, TypeError, ValueError, DsvError) as exc:
            failures.append(f"vector {name}: cannot evaluate ({type(exc).__name__}: {exc})")
            continue
        _diff(f"vector {name}: expected", vector.get("expected"), actual, failures)
    reference_ids = [c["id"] for c in (*ROW_CASES, *SCHEMA_CASES, *SPLIT_CASES, *EXAMPLE_ID_CASES)]
    failures += [f"vector {i}: missing from the file" for i in reference_ids if i not in seen]
    return failures


# --- the cases ---------------------------------------------------------------


__all__ = [
    "ENCODING",
    "EXAMPLE_ID_CASES",
    "FORMAT",
    "NOTES",
    "ROW_CASES",
    "SCHEMA_CASES",
    "SPLIT_ALGORITHM",
    "SPLIT_CASES",
    "build_vectors",
    "check_vectors",
    "dumps_vectors",
    "expected_of",
    "split_identifier_bytes",
    "table_from_rows",
]
