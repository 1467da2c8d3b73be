"""Conformance vectors: the shipped file, an independent reference encoder, literal spot checks, the check command."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import unicodedata
from decimal import Context, Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsv_platform.core.identity.conformance import FORMAT, build_vectors, check_vectors, dumps_vectors
from dsv_platform_tests.fixtures.cli_runner import DsvCli

DOC = build_vectors()
VECTORS = {v["id"]: v for v in DOC["vectors"]}
ROW_VECTORS = [v for v in DOC["vectors"] if v["kind"] == "rows"]
GOOD_ROW_VECTORS = [v for v in ROW_VECTORS if not v["id"].startswith("error-")]
SPLIT_VECTORS = [v for v in DOC["vectors"] if v["kind"] == "hash-split/1"]
ID_VECTORS = [v for v in DOC["vectors"] if v["kind"] == "example-id"]


# --- an independent reference encoder, written from docs/canonical-encoding.md alone --

_UNIT_EXP = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_STRING_ESCAPES = {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


class ReferenceError_(Exception):
    pass


def _ref_float(text: str, scale: int, bits: int) -> str:
    x = float(text)
    if bits == 32:
        x = float(np.float32(x))
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    out = f"{x:.{scale}f}"  # CPython's correctly rounded, half-even on the exact binary value
    return out[1:] if out.startswith("-") and set(out[1:]) <= {"0", "."} else out


def _ref_decimal(text: str, scale: int) -> str:
    q = Decimal(text).quantize(Decimal(1).scaleb(-scale), context=Context(prec=200))
    out = format(q, "f")
    return out[1:] if q == 0 and out.startswith("-") else out


def _ref_timestamp_count(value: dict[str, Any], resolution: str) -> int:
    if value["tz"] is None:
        raise ReferenceError_("naive timestamp")
    ns = value["epoch"] * 10 ** (9 - _UNIT_EXP[value["unit"]])
    step = 10 ** (9 - _UNIT_EXP[resolution])
    if ns % step:
        raise ReferenceError_("not a whole number of the unit")
    return ns // step


def ref_text(value: Any, column: dict[str, Any]) -> str:
    t = column["type"]
    if value is None:
        if not column.get("nullable", False):
            raise ReferenceError_(f"null in {column['name']}")
        return "\\N"
    if t.startswith(("int", "uint")):
        return str(int(value))
    if t == "bool":
        return "t" if value else "f"
    if t == "string":
        return "".join(_STRING_ESCAPES.get(ch, ch) for ch in value)
    if t == "decimal":
        return _ref_decimal(value, column["scale"])
    if t in ("float32", "float64"):
        return _ref_float(value, column["scale"], 32 if t == "float32" else 64)
    if t == "timestamp":
        return str(_ref_timestamp_count(value, column["resolution"]))
    if t == "date":
        d = dt.date.fromisoformat(value)
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
    assert t == "binary"
    return "\\\\x" + bytes.fromhex(value).hex()


def _ref_sort_value(value: Any, column: dict[str, Any]) -> Any:
    t = column["type"]
    if t == "string":
        return value.encode("utf-8")
    if t == "decimal":
        return Decimal(value)
    if t == "timestamp":
        return _ref_timestamp_count(value, "ns")
    if t == "date":
        return dt.date.fromisoformat(value)
    return value  # ints and bools compare as Python values (False < True)


def ref_digest(vector: dict[str, Any]) -> dict[str, Any]:
    contract = vector["contract"]
    columns = contract["columns"]
    by_name = {c["name"]: c for c in columns}
    rows = vector["rows"]
    keyed = sorted(rows, key=lambda r: tuple(_ref_sort_value(r[k], by_name[k]) for k in contract["key"]))
    parts: dict[str, list[str]] = {}
    pcol = vector["partition_by"]
    for row in keyed:
        line = "\t".join(ref_text(row[c["name"]], c) for c in columns)
        pkey = f"{pcol}={ref_text(row[pcol], by_name[pcol])}" if pcol else "all"
        parts.setdefault(pkey, []).append(line)
    if not parts:
        parts["all"] = []
    leaves = []
    for pkey in sorted(parts):
        text = "".join(line + "\n" for line in parts[pkey])
        leaves.append({"key": pkey, "rows": len(parts[pkey]), "hash": hashlib.sha256(text.encode("utf-8")).hexdigest(), "lines": parts[pkey]})
    root = "\n".join(f"{leaf['key']}:{leaf['hash']}" for leaf in leaves)
    return {"partitions": leaves, "content_hash": hashlib.sha256(root.encode("utf-8")).hexdigest()}


def ref_schema_json(contract: dict[str, Any]) -> str:
    def params(c: dict[str, Any]) -> dict[str, Any]:
        if c["type"] == "decimal":
            return {"precision": c["precision"], "scale": c["scale"]}
        if c["type"] in ("float32", "float64"):
            return {"scale": c["scale"]}
        if c["type"] == "timestamp":
            return {"resolution": c["resolution"]}
        return {}

    cols = [
        {"name": c["name"], "type": c["type"], "params": params(c), "nullable": c.get("nullable", False), "unit": c.get("unit")}
        for c in contract["columns"]
    ]
    return json.dumps({"columns": cols, "key": contract["key"]}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- the shipped file ----------------------------------------------------------


def test_conformance_shipped_file_equals_build_vectors() -> None:
    shipped = resources.files("dsv_platform.conformance").joinpath("vectors.json").read_text(encoding="utf-8")
    assert shipped == dumps_vectors(DOC), "regenerate with: dsv conformance --write dsv_platform/conformance/vectors.json"


def test_conformance_shipped_file_passes_check() -> None:
    shipped = json.loads(resources.files("dsv_platform.conformance").joinpath("vectors.json").read_text(encoding="utf-8"))
    assert check_vectors(shipped) == []


def test_conformance_file_is_ascii_so_nfd_strings_survive() -> None:
    text = dumps_vectors(DOC)
    assert text.isascii()
    assert "cafe\\u0301" in text and "caf\\u00e9" in text


def test_conformance_covers_every_rule() -> None:
    types = {c["type"] for v in ROW_VECTORS for c in v["contract"]["columns"]}
    assert types >= {
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "bool", "string", "decimal", "float32", "float64", "timestamp", "date", "binary",
    }
    units = {c["resolution"] for v in GOOD_ROW_VECTORS for c in v["contract"]["columns"] if c["type"] == "timestamp"}
    assert units == {"s", "ms", "us", "ns"}
    errors = {v["id"] for v in ROW_VECTORS if "error" in v["expected"]}
    assert errors >= {
        "error-null-key",
        "error-duplicate-key",
        "error-naive-timestamp",
        "error-sub-resolution",
        "error-missing-column",
        "error-null-not-nullable",
    }
    assert any(len(v["expected"]["partitions"]) > 2 for v in GOOD_ROW_VECTORS)
    assert any(v["expected"]["partitions"][0]["rows"] == 0 for v in GOOD_ROW_VECTORS)


@pytest.mark.parametrize("vector", ROW_VECTORS, ids=[v["id"] for v in ROW_VECTORS])
def test_conformance_error_vectors_and_only_those_fail(vector: dict[str, Any]) -> None:
    expected = vector["expected"]
    if vector["id"].startswith("error-"):
        wanted = "ContractError" if vector["id"].startswith("error-contract-") else "ContractViolationError"
        assert expected["error"] == wanted
        assert expected["mentions"] == vector["mentions"], "the error message must name the column / row key"
    else:
        assert "error" not in expected


# --- independent justification of every expected value --------------------------


@pytest.mark.parametrize("vector", GOOD_ROW_VECTORS, ids=[v["id"] for v in GOOD_ROW_VECTORS])
def test_conformance_vector_agrees_with_reference_encoder(vector: dict[str, Any]) -> None:
    ref = ref_digest(vector)
    got = vector["expected"]
    assert [p["key"] for p in got["partitions"]] == [p["key"] for p in ref["partitions"]]
    for mine, theirs in zip(got["partitions"], ref["partitions"], strict=True):
        assert mine["lines"] == theirs["lines"]
        assert mine["rows"] == theirs["rows"]
        assert mine["hash"] == theirs["hash"]
    assert got["content_hash"] == ref["content_hash"]
    assert got["schema_hash"] == hashlib.sha256(ref_schema_json(vector["contract"]).encode("utf-8")).hexdigest()


def _column_texts(vector_id: str, column: int) -> list[str]:
    lines = [line for p in VECTORS[vector_id]["expected"]["partitions"] for line in p["lines"]]
    return [line.split("\t")[column] for line in lines]


# Literal expectations for the trickiest cases, checked by hand (not computed).
SPOT_CHECKS = {
    ("float64-scale-2", 1): ["0.12", "0.38", "-0.12", "-0.38", "0.00", "0.00", "-0.01", "1.00", "0.10", "0.00", "0.00", "NaN", "Infinity", "-Infinity",
                             f"{1e300:.2f}", f"-{1e300:.2f}", "0.00", "123456789.12", "\\N"],
    ("float64-scale-0", 1): ["2", "4", "-2", "0", "0", "2", "0", "9007199254740992", "10000000000000000000000"],
    ("float64-scale-20", 1): ["0.10000000000000000555", "-0.10000000000000000555", "0.00000000000000000001", "0.00000000000000000000",
                              "0.00000000000000000002", "0.00000000000000000002", "123.45600000000000306954"],
    ("float32-scale-3", 1): ["0.125", "0.062", "-0.062", "0.100", "16777216.000", "-1.500", "NaN", "-Infinity"],
    ("decimal-basic", 1): ["0.00", "0.00", "0.00", "0.05", "-0.50", "-12.34", "12345678.90", "-99999999.99", "\\N"],
    ("decimal-scale-0", 1): ["0", "-1", "99999", "-99999", "7"],
    ("decimal-small-values", 1): ["0.0000000000", "0.0000001000", "-0.0000001000", "0.0000000001", "-0.0000000001", "1.5000000000", "-12345678.0000000001"],
    ("decimal-precision-38", 2): ["0." + "9" * 38, "-0." + "0" * 37 + "1", "0." + "0" * 38],
    ("timestamps", 5): ["1500", "-1", "1773446400123456"],
    ("timestamps", 6): ["2000000000", "-2000000000", "1773446400000000000"],
    ("timestamps", 2): ["0", "-1", "1773446400123"],
    ("dates", 1): ["1970-01-01", "1969-12-31", "2026-03-14", "0001-01-01", "0999-12-31", "9999-12-31", "\\N"],
    ("binary", 1): ["\\\\x", "\\\\x00ff", "\\\\xdeadbeef", "\\\\x5c", "\\\\x0a09", "\\N"],
    ("int-extremes", 7): ["0", "9223372036854775808", "18446744073709551615"],
    ("key-order-strings", 0): ["", "Z", "a", "a\x00", "ab", "e", "e\u0301", "f", "\u00e9", "\uffff", "\U0001F600"],
    ("key-order-multi", 1): ["-100", "-1", "0", "9", "10"] * 2,
}


@pytest.mark.parametrize(("where", "texts"), SPOT_CHECKS.items(), ids=[f"{v}[{c}]" for v, c in SPOT_CHECKS])
def test_conformance_spot_check(where: tuple[str, int], texts: list[str]) -> None:
    assert _column_texts(*where) == texts


def test_conformance_string_escapes_literal() -> None:
    got = dict(line.split("\t", 1) for line in VECTORS["string-escapes"]["expected"]["partitions"][0]["lines"])
    assert got["1"] == "back\\\\slash"
    assert [got[str(i)] for i in range(2, 8)] == ["bs\\b", "ff\\f", "lf\\n", "cr\\r", "tab\\t", "vt\\v"]
    assert got["8"] == "\\\\N" and got["20"] == "\\N"  # a literal backslash-N is not a null
    assert got["14"] == "cafe\u0301" != got["13"]  # NFD stays NFD in row text
    assert got["11"] == "nul\x00byte" and got["12"] == "ctl\x01\x1b\x7f"


def test_conformance_empty_partition_hashes_no_bytes() -> None:
    leaf = VECTORS["empty"]["expected"]["partitions"][0]
    assert leaf == {"key": "all", "rows": 0, "hash": hashlib.sha256(b"").hexdigest(), "lines": []}
    assert VECTORS["empty"]["expected"]["content_hash"] == hashlib.sha256(f"all:{hashlib.sha256(b'').hexdigest()}".encode()).hexdigest()


def test_conformance_partition_keys_sort_by_code_point() -> None:
    assert [p["key"] for p in VECTORS["partitions-int"]["expected"]["partitions"]] == ["bucket=-1", "bucket=10", "bucket=9"]
    assert [p["key"] for p in VECTORS["partitions-string"]["expected"]["partitions"]] == ["region=EU", "region=ap", "region=eu", "region=us"]


def test_conformance_schema_changes_change_the_hash() -> None:
    schema = {v["id"]: v["expected"] for v in DOC["vectors"] if v["kind"] == "schema"}
    hashes = [e["schema_hash"] for e in schema.values()]
    assert len(set(hashes)) == len(hashes)
    for ident, expected in schema.items():
        assert expected["schema_json"] == ref_schema_json(VECTORS[ident]["contract"])
        assert expected["schema_hash"] == hashlib.sha256(expected["schema_json"].encode("utf-8")).hexdigest()


# --- hash-split/1 ---------------------------------------------------------------


def _spec_bucket(salt: str, identifier: Any, modulus: int) -> int:
    text = unicodedata.normalize("NFC", identifier) if isinstance(identifier, str) else str(identifier)
    return int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest(), 16) % modulus


@pytest.mark.parametrize("vector", SPLIT_VECTORS, ids=[v["id"] for v in SPLIT_VECTORS])
def test_conformance_split_vectors_follow_the_spec_formula(vector: dict[str, Any]) -> None:
    policy, expected = vector["policy"], vector["expected"]
    if "error" in expected:
        assert expected == {"error": "SplitPolicyError"}
        assert any(isinstance(i, bool) or i is None for i in vector["identifiers"])
        return
    buckets = [_spec_bucket(policy["salt"], i, policy["modulus"]) for i in vector["identifiers"]]
    assert expected["buckets"] == buckets
    bounds = [(s["name"], s["upper"]) for s in policy["splits"]]
    assert expected["splits"] == [next(n for n, upper in bounds if b < upper) for b in buckets]


def test_conformance_split_nfd_and_nfc_identifiers_agree() -> None:
    v = VECTORS["split-fraud-v6"]
    by_id = dict(zip(map(repr, v["identifiers"]), v["expected"]["buckets"], strict=True))
    assert by_id[repr("caf\u00e9")] == by_id[repr("cafe\u0301")]
    assert by_id[repr("\u00c5")] == by_id[repr("A\u030a")] == by_id[repr("\u212b")]
    assert by_id[repr("42")] == by_id[repr(42)]


@pytest.mark.parametrize("vector", SPLIT_VECTORS, ids=[v["id"] for v in SPLIT_VECTORS])
def test_conformance_split_vectors_match_splits_module(vector: dict[str, Any]) -> None:
    from dsv_platform.core.errors import SplitPolicyError
    from dsv_platform.core.splits import hash_split as splits

    policy = splits.HashSplitPolicy(
        vector["policy"]["salt"], tuple(splits.SplitRange(s["name"], s["upper"]) for s in vector["policy"]["splits"]), vector["policy"]["modulus"]
    )
    expected = vector["expected"]
    if "error" in expected:
        bad = next(i for i in vector["identifiers"] if isinstance(i, bool) or i is None)
        with pytest.raises(SplitPolicyError):
            policy.bucket_of(bad)
        with pytest.raises(SplitPolicyError):
            policy.buckets(vector["identifiers"])
        return
    assert [policy.bucket_of(i) for i in vector["identifiers"]] == expected["buckets"]
    assert [policy.split_of(i) for i in vector["identifiers"]] == expected["splits"]
    strings = [i for i in vector["identifiers"] if isinstance(i, str)]
    ints = [i for i in vector["identifiers"] if not isinstance(i, str)]
    by_id = dict(zip(map(repr, vector["identifiers"]), expected["buckets"], strict=True))
    assert policy.buckets(strings).tolist() == [by_id[repr(s)] for s in strings]
    assert policy.buckets(ints).tolist() == [by_id[repr(i)] for i in ints]
    assigned = policy.assign_values(strings)
    assert assigned.splits.to_pylist() == [policy.split_of(s) for s in strings]


def _ref_assignment_hash(ids: list[str], splits: list[str]) -> str:
    """docs/hashing.md: lines ``escaped id TAB split LF`` sorted by id (UTF-8 bytes), then split."""
    pairs = sorted(zip(ids, splits, strict=True), key=lambda p: (p[0].encode(), p[1].encode()))
    text = "".join(f"{ref_text(i, {'type': 'string'})}\t{ref_text(s, {'type': 'string'})}\n" for i, s in pairs)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("vector", ID_VECTORS, ids=[v["id"] for v in ID_VECTORS])
def test_conformance_example_id_vectors_follow_the_spec(vector: dict[str, Any]) -> None:
    contract, expected, policy = vector["contract"], vector["expected"], vector["policy"]
    assert len(contract["key"]) > 1
    by_name = {c["name"]: c for c in contract["columns"]}
    try:
        ids = ["\t".join(ref_text(row[k], by_name[k]) for k in contract["key"]) for row in vector["rows"]]
    except ReferenceError_:
        assert expected == {"error": "ContractViolationError"} and vector["id"].startswith("example-id-error-")
        return
    assert expected["example_ids"] == ids and len(set(ids)) == len(ids)
    buckets = [_spec_bucket(policy["salt"], i, policy["modulus"]) for i in ids]
    assert expected["buckets"] == buckets
    assert expected["assignment_hash"] == _ref_assignment_hash(ids, expected["splits"])


@pytest.mark.parametrize("vector", [v for v in ID_VECTORS if "error" not in v["expected"]], ids=lambda v: v["id"])
def test_conformance_example_id_vectors_match_the_split_assignment(vector: dict[str, Any]) -> None:
    from dsv_platform.core.contracts.contract import parse_contract
    from dsv_platform.core.identity.conformance import table_from_rows
    from dsv_platform.core.identity.example_id import assignment_key, with_example_id
    from dsv_platform.core.splits.hash_split import HashSplitPolicy, SplitRange
    from dsv_platform.core.splits.policy import assign_examples
    from dsv_platform.core.splits.split_checks import assignment_hash

    contract = parse_contract(vector["contract"], source="vector")
    p = vector["policy"]
    policy = HashSplitPolicy(p["salt"], tuple(SplitRange(s["name"], s["upper"]) for s in p["splits"]), p["modulus"])
    table = with_example_id(table_from_rows(contract, vector["rows"]), contract)
    _, stored = assign_examples(table, policy, "example_id", "example_id", assignment_key(contract))
    assert stored.column_names == ["example_id", *contract.key, "split", "bucket"]
    by_id = dict(zip(vector["expected"]["example_ids"], vector["expected"]["splits"], strict=True))
    assert dict(zip(stored["example_id"].to_pylist(), stored["split"].to_pylist(), strict=True)) == by_id
    assert assignment_hash(stored, "example_id") == vector["expected"]["assignment_hash"]


# --- check_vectors and the command --------------------------------------------


def test_conformance_check_reports_each_mismatch() -> None:
    doc = copy.deepcopy(DOC)
    tampered = next(v for v in doc["vectors"] if v["id"] == "float64-scale-2")
    tampered["expected"]["partitions"][0]["lines"][0] = "0\t0.13"
    doc["vectors"] = [v for v in doc["vectors"] if v["id"] != "dates"]
    failures = check_vectors(doc)
    assert any("float64-scale-2" in f and "0.13" in f for f in failures)
    assert any("float64-scale-2" in f and "hash" in f for f in failures) is False  # only the changed field is reported
    assert "vector dates: missing from the file" in failures
    assert len(failures) == 2


def test_conformance_check_rejects_non_documents() -> None:
    assert check_vectors({"vectors": []}) == [f"not a {FORMAT!r} document (needs 'format' and a 'vectors' list)"]
    doc = copy.deepcopy(DOC)
    doc["vectors"][0]["kind"] = "nonsense"
    assert any("cannot evaluate" in f for f in check_vectors(doc))


def test_conformance_command_prints_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    dsv = DsvCli(capsys, monkeypatch, {})  # in process
    out = dsv("conformance")
    assert out.code == 0, out.err
    assert out.out == dumps_vectors(DOC)
    target = tmp_path / "v.json"
    assert dsv("conformance", "--write", str(target)).code == 0
    assert target.read_text(encoding="utf-8") == out.out
    ok = dsv("conformance", "--check", str(target))
    assert ok.code == 0, ok.err

    doc = json.loads(out.out)
    doc["vectors"][0]["expected"]["content_hash"] = "0" * 64
    target.write_text(json.dumps(doc), encoding="utf-8")
    bad = dsv("conformance", "--check", str(target))
    assert bad.code == 1
    assert "content_hash" in bad.out and doc["vectors"][0]["id"] in bad.out
    assert "1 mismatch" in bad.err

    target.write_text("{not json", encoding="utf-8")
    broken = dsv("conformance", "--check", str(target))
    assert broken.code == 2 and broken.out == ""
    assert len(broken.err.strip().splitlines()) == 1 and str(target) in broken.err
