"""The cases of the conformance vectors (see :mod:`dsv_platform.core.identity.conformance`).

Inputs only: contracts, typed JSON rows, schemas and split identifiers; the
expected outputs are computed by :func:`dsv_platform.core.identity.conformance.build_vectors`.
"""

from __future__ import annotations

from typing import Any

SPLIT_ALGORITHM = "hash-split/1"


def _contract(name: str, key: list[str], columns: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "key": key, "columns": columns}


def _ts(epoch: int, unit: str, tz: str | None = "UTC") -> dict[str, Any]:
    return {"unit": unit, "epoch": epoch, "tz": tz}


def _rows(rule: str, ident: str, contract: dict[str, Any], rows: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": ident, "kind": "rows", "rule": rule, "contract": contract, "partition_by": extra.pop("partition_by", None), "rows": rows, **extra}


_K = {"name": "k", "type": "int64"}
_INT_COLUMNS = [{"name": t, "type": t} for t in ("int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64")]
_HOSTILE = [
    "plain", "back\\slash", "bs\b", "ff\f", "lf\n", "cr\r", "tab\t", "vt\v", "\\N", "a\\tb", "\"quoted\" 'single'",
    "nul\x00byte", "ctl\x01\x1b\x7f", "caf\u00e9", "cafe\u0301", "\u65e5\u672c\u8a9e", "emoji \U0001F600", "ls\u2028nel\x85", "", " lead and trail ",
]
_FLOATS2 = [
    "0.125", "0.375", "-0.125", "-0.375", "-0.0001", "-0.004", "-0.005", "1.005", "0.1", "-0.0", "0",
    "NaN", "Infinity", "-Infinity", "1e300", "-1e300", "5e-324", "123456789.125",
]
_SCHEMA_BASE: list[dict[str, Any]] = [
    {"name": "id", "type": "int64"},
    {"name": "amount", "type": "decimal", "precision": 12, "scale": 2, "unit": "EUR"},
    {"name": "ts", "type": "timestamp", "resolution": "us"},
]


def _schema(ident: str, rule: str, columns: list[dict[str, Any]], key: list[str] | None = None) -> dict[str, Any]:
    return {"id": ident, "kind": "schema", "rule": rule, "contract": _contract("payments", key or ["id"], columns)}


def _with(column: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {k: v for k, v in column.items() if k not in changes or changes[k] is not None}
    out.update({k: v for k, v in changes.items() if v is not None})
    return out


ROW_CASES: tuple[dict[str, Any], ...] = (
    _rows("integers: base 10, '-' for negatives, full int64/uint64 range", "int-extremes",
          _contract("ints", ["int64"], [{"name": "int64", "type": "int64"}, *_INT_COLUMNS]),
          [{"int64": -(2**63), "int8": -128, "int16": -32768, "int32": -(2**31), "uint8": 0, "uint16": 0, "uint32": 0, "uint64": 0},
           {"int64": 2**63 - 1, "int8": 127, "int16": 32767, "int32": 2**31 - 1, "uint8": 255, "uint16": 65535, "uint32": 2**32 - 1, "uint64": 2**64 - 1},
           {"int64": 0, "int8": -1, "int16": 10, "int32": -100, "uint8": 7, "uint16": 1000, "uint32": 9, "uint64": 2**63}]),
    _rows("bool: t or f", "bool", _contract("b", ["k"], [_K, {"name": "b", "type": "bool", "nullable": True}]),
          [{"k": 1, "b": True}, {"k": 2, "b": False}, {"k": 3, "b": None}]),
    _rows("string escapes (COPY text), no Unicode normalization, NUL written as is", "string-escapes",
          _contract("s", ["k"], [_K, {"name": "s", "type": "string", "nullable": True}]),
          [{"k": i, "s": s} for i, s in enumerate([*_HOSTILE, None])]),
    _rows("decimal: plain notation, exactly scale digits, 0 before the point, never -0", "decimal-basic",
          _contract("d", ["k"], [_K, {"name": "d", "type": "decimal", "precision": 10, "scale": 2, "nullable": True}]),
          [{"k": i, "d": d} for i, d in enumerate(["0", "-0", "-0.00", "0.05", "-0.5", "-12.34", "12345678.9", "-99999999.99", None])]),
    _rows("decimal scale 0: no point", "decimal-scale-0",
          _contract("d", ["k"], [_K, {"name": "d", "type": "decimal", "precision": 5, "scale": 0}]),
          [{"k": i, "d": d} for i, d in enumerate(["0", "-1", "99999", "-99999", "7"])]),
    _rows("decimal scale > 6: small values stay in plain notation", "decimal-small-values",
          _contract("d", ["k"], [_K, {"name": "d", "type": "decimal", "precision": 18, "scale": 10}]),
          [{"k": i, "d": d} for i, d in enumerate(["0", "0.0000001", "-0.0000001", "0.0000000001", "-0.0000000001", "1.5", "-12345678.0000000001"])]),
    _rows("decimal precision 38 and 76 extremes", "decimal-precision-38",
          _contract("d", ["k"], [_K, {"name": "p38s0", "type": "decimal", "precision": 38, "scale": 0},
                                 {"name": "p38s38", "type": "decimal", "precision": 38, "scale": 38},
                                 {"name": "p76s10", "type": "decimal", "precision": 76, "scale": 10}]),
          [{"k": 1, "p38s0": "9" * 38, "p38s38": "0." + "9" * 38, "p76s10": "9" * 66 + "." + "9" * 10},
           {"k": 2, "p38s0": "-" + "9" * 38, "p38s38": "-0." + "0" * 37 + "1", "p76s10": "-0.0000000001"},
           {"k": 3, "p38s0": "0", "p38s38": "0", "p76s10": "0"}]),
    _rows("float64 at scale 2: correctly rounded, half to even on the exact binary value; -0 prints as 0", "float64-scale-2",
          _contract("f", ["k"], [_K, {"name": "x", "type": "float64", "scale": 2, "nullable": True}]),
          [{"k": i, "x": x} for i, x in enumerate([*_FLOATS2, None])]),
    _rows("float64 at scale 0: ties to even, no point", "float64-scale-0",
          _contract("f", ["k"], [_K, {"name": "x", "type": "float64", "scale": 0}]),
          [{"k": i, "x": x} for i, x in enumerate(["2.5", "3.5", "-2.5", "0.5", "-0.5", "1.5", "-0.4", "9007199254740992", "1e22"])]),
    _rows("float64 at high scale: the exact binary value shows", "float64-scale-20",
          _contract("f", ["k"], [_K, {"name": "x", "type": "float64", "scale": 20}]),
          [{"k": i, "x": x} for i, x in enumerate(["0.1", "-0.1", "1e-20", "5e-21", "1.5e-20", "2.5e-20", "123.456"])]),
    _rows("float64 at a scale above 38 (the contract allows up to 60)", "float64-scale-45",
          _contract("f", ["k"], [_K, {"name": "x", "type": "float64", "scale": 45}]),
          [{"k": i, "x": x} for i, x in enumerate(["0", "-0.0", "1e-300", "0.5", "-1.6487185469322154e-26", "1e-45", "-5e-46"])]),
    _rows("decimal at scale > 28: tiny values keep every digit", "decimal-tiny-at-large-scale",
          _contract("d", ["k"], [_K, {"name": "d", "type": "decimal", "precision": 38, "scale": 35}]),
          [{"k": i, "d": d} for i, d in enumerate(["0.0000001", "-0.00000012345678901234567890123456789", "0.00000000000000000000000000000000001", "0"])]),
    _rows("float32: the float32 value, rounded like float64", "float32-scale-3",
          _contract("f", ["k"], [_K, {"name": "x", "type": "float32", "scale": 3}]),
          [{"k": i, "x": x} for i, x in enumerate(["0.125", "0.0625", "-0.0625", "0.100000001490116119384765625", "16777216", "-1.5", "NaN", "-Infinity"])]),
    _rows("timestamps: integer count of the contract's unit since the epoch, any stored unit or zone", "timestamps",
          _contract("t", ["k"], [_K, {"name": "t_s", "type": "timestamp", "resolution": "s"},
                                 {"name": "t_ms", "type": "timestamp", "resolution": "ms"},
                                 {"name": "t_us", "type": "timestamp", "resolution": "us"},
                                 {"name": "t_ns", "type": "timestamp", "resolution": "ns", "nullable": True},
                                 {"name": "us_from_ns", "type": "timestamp", "resolution": "us"},
                                 {"name": "ns_from_s", "type": "timestamp", "resolution": "ns"},
                                 {"name": "ms_in_zone", "type": "timestamp", "resolution": "ms"}]),
          [{"k": 1, "t_s": _ts(0, "s"), "t_ms": _ts(0, "ms"), "t_us": _ts(0, "us"), "t_ns": _ts(0, "ns"),
            "us_from_ns": _ts(1_500_000, "ns"), "ns_from_s": _ts(2, "s"), "ms_in_zone": _ts(1_773_446_400_000, "ms", "America/New_York")},
           {"k": 2, "t_s": _ts(-1, "s"), "t_ms": _ts(-1, "ms"), "t_us": _ts(-1, "us"), "t_ns": _ts(-1, "ns"),
            "us_from_ns": _ts(-1_000, "ns"), "ns_from_s": _ts(-2, "s"), "ms_in_zone": _ts(-1, "ms", "America/New_York")},
           {"k": 3, "t_s": _ts(1_773_446_400, "s"), "t_ms": _ts(1_773_446_400_123, "ms"), "t_us": _ts(-86_400_000_001, "us"),
            "t_ns": None, "us_from_ns": _ts(1_773_446_400_123_456_000, "ns"), "ns_from_s": _ts(1_773_446_400, "s"),
            "ms_in_zone": _ts(0, "ms", "America/New_York")}]),
    _rows("date: YYYY-MM-DD", "dates",
          _contract("d", ["k"], [_K, {"name": "d", "type": "date", "nullable": True}]),
          [{"k": i, "d": d} for i, d in enumerate(["1970-01-01", "1969-12-31", "2026-03-14", "0001-01-01", "0999-12-31", "9999-12-31", None])]),
    _rows("binary: \\\\x then lowercase hex", "binary",
          _contract("b", ["k"], [_K, {"name": "b", "type": "binary", "nullable": True}]),
          [{"k": i, "b": b} for i, b in enumerate(["", "00ff", "deadbeef", "5c", "0a09", None])]),
    _rows("null of every type is \\N", "nulls",
          _contract("n", ["k"], [_K, *[{**c, "nullable": True} for c in _INT_COLUMNS[:1]],
                                 {"name": "b", "type": "bool", "nullable": True}, {"name": "s", "type": "string", "nullable": True},
                                 {"name": "d", "type": "decimal", "precision": 5, "scale": 2, "nullable": True},
                                 {"name": "f", "type": "float64", "scale": 1, "nullable": True},
                                 {"name": "t", "type": "timestamp", "resolution": "ms", "nullable": True},
                                 {"name": "dt", "type": "date", "nullable": True}, {"name": "bin", "type": "binary", "nullable": True}]),
          [{"k": 1, "int8": None, "b": None, "s": None, "d": None, "f": None, "t": None, "dt": None, "bin": None},
           {"k": 2, "int8": 1, "b": True, "s": "", "d": "0", "f": "0", "t": _ts(0, "ms"), "dt": "2000-02-29", "bin": ""}]),
    _rows("string keys sort by UTF-8 bytes (Z < a < e < NFD e-acute < f < NFC e-acute)", "key-order-strings",
          _contract("ks", ["s"], [{"name": "s", "type": "string"}]),
          [{"s": s} for s in ["a", "Z", "\u00e9", "e", "e\u0301", "f", "", "ab", "a\x00", "\U0001F600", "\uffff"]]),
    _rows("multi-column key: strings by bytes, then numbers numerically (negatives first, 10 after 9)", "key-order-multi",
          _contract("km", ["g", "n"], [{"name": "g", "type": "string"}, {"name": "n", "type": "int64"}, {"name": "v", "type": "string"}]),
          [{"g": g, "n": n, "v": f"{g}{n}"} for g in ("y", "x") for n in (10, 9, -1, -100, 0)]),
    _rows("typed key order: decimal numerically, false before true, dates by day, timestamps by instant, uint64 above int64", "key-order-typed",
          _contract("kt", ["b", "d", "dt", "t", "u"], [{"name": "b", "type": "bool"}, {"name": "d", "type": "decimal", "precision": 6, "scale": 2},
                                                     {"name": "dt", "type": "date"}, {"name": "t", "type": "timestamp", "resolution": "ms"},
                                                     {"name": "u", "type": "uint64"}]),
          [{"b": b, "d": d, "dt": "2026-01-01", "t": _ts(t, "ms"), "u": u}
           for b in (True, False) for d in ("10.00", "9.99", "-0.50", "-10.00") for t, u in ((5, 2**63), (-5, 1), (5, 3))]),
    _rows("an empty dataset is one empty partition 'all' (hash of no bytes)", "empty",
          _contract("e", ["k"], [_K, {"name": "s", "type": "string"}]), []),
    _rows("partitions by date: Hive keys, one leaf each, content hash over sorted key:hash lines", "partitions-date",
          _contract("p", ["k"], [_K, {"name": "date", "type": "date"}, {"name": "v", "type": "decimal", "precision": 6, "scale": 2}]),
          [{"k": k, "date": d, "v": v} for k, d, v in ((3, "2026-03-14", "1.50"), (1, "2026-03-15", "-2.00"), (2, "2026-03-14", "0.05"),
                                                        (4, "2026-03-13", "7"), (5, "2026-03-15", "0"))],
          partition_by="date"),
    _rows("partition keys sort by code point (EU < eu) and use the canonical text", "partitions-string",
          _contract("p", ["k"], [_K, {"name": "region", "type": "string"}]),
          [{"k": k, "region": r} for k, r in ((1, "eu"), (2, "EU"), (3, "us"), (4, "eu"), (5, "ap"))], partition_by="region"),
    _rows("integer partition keys sort as text (-1 < 10 < 9)", "partitions-int",
          _contract("p", ["k"], [_K, {"name": "bucket", "type": "int32"}]),
          [{"k": k, "bucket": b} for k, b in ((1, 9), (2, 10), (3, -1), (4, 9))], partition_by="bucket"),
    _rows("a null key is an error", "error-null-key", _contract("e", ["k"], [_K]), [{"k": 1}, {"k": None}],
          mentions=["'k'"]),
    _rows("a duplicate key is an error", "error-duplicate-key", _contract("e", ["k"], [_K, {"name": "v", "type": "string"}]),
          [{"k": 7, "v": "a"}, {"k": 1, "v": "b"}, {"k": 7, "v": "c"}], mentions=["row key 7"]),
    _rows("a duplicate multi-column key is an error", "error-duplicate-multi-key",
          _contract("e", ["a", "b"], [{"name": "a", "type": "string"}, {"name": "b", "type": "int32"}]),
          [{"a": "x", "b": 1}, {"a": "x", "b": 2}, {"a": "x", "b": 1}], mentions=["('x', 1)"]),
    _rows("a naive timestamp is an error", "error-naive-timestamp",
          _contract("e", ["k"], [_K, {"name": "ts", "type": "timestamp", "resolution": "us"}]),
          [{"k": 1, "ts": _ts(0, "us", None)}], mentions=["'ts'"]),
    _rows("a timestamp that is not a whole number of the unit is an error (never truncated)", "error-sub-resolution",
          _contract("e", ["k"], [_K, {"name": "ts", "type": "timestamp", "resolution": "us"}]),
          [{"k": 1, "ts": _ts(1_000, "ns")}, {"k": 2, "ts": _ts(1_500, "ns")}], mentions=["'ts'", "row key 2"]),
    _rows("a negative sub-resolution timestamp is an error too", "error-sub-resolution-negative",
          _contract("e", ["k"], [_K, {"name": "ts", "type": "timestamp", "resolution": "s"}]),
          [{"k": 1, "ts": _ts(-1_500, "ms")}], mentions=["'ts'"]),
    _rows("a missing column is an error", "error-missing-column",
          _contract("e", ["k"], [_K, {"name": "v", "type": "string"}]), [{"k": 1}], mentions=["'v'"]),
    _rows("a null in a non-nullable column is an error", "error-null-not-nullable",
          _contract("e", ["k"], [_K, {"name": "v", "type": "string"}]), [{"k": 1, "v": "a"}, {"k": 2, "v": None}],
          mentions=["'v'", "row key 2"]),
    _rows("a contract with an unknown type is an error", "error-contract-unknown-type",
          _contract("e", ["k"], [_K, {"name": "v", "type": "varchar"}]), [], mentions=["'v'", "varchar"]),
    _rows("a float needs a scale", "error-contract-float-without-scale",
          _contract("e", ["k"], [_K, {"name": "x", "type": "float64"}]), [], mentions=["'x'", "scale"]),
    _rows("a decimal needs precision and scale", "error-contract-decimal-without-precision",
          _contract("e", ["k"], [_K, {"name": "d", "type": "decimal", "scale": 2}]), [], mentions=["'d'", "precision"]),
    _rows("the key must name declared columns", "error-contract-key-undeclared",
          _contract("e", ["id"], [_K]), [], mentions=["'id'"]),
    _rows("unknown column keys are errors", "error-contract-unknown-column-key",
          _contract("e", ["k"], [_K, {"name": "v", "type": "string", "nullabel": True}]), [], mentions=["'v'", "nullabel"]),
)

SCHEMA_CASES: tuple[dict[str, Any], ...] = (
    _schema("schema-base", "schema hash: canonical JSON of {columns: [{name, type, params, nullable, unit}], key}", _SCHEMA_BASE),
    _schema("schema-rename", "a rename changes the schema hash", [_SCHEMA_BASE[0], _with(_SCHEMA_BASE[1], name="value"), _SCHEMA_BASE[2]]),
    _schema("schema-type-change", "a type change changes the schema hash",
            [_SCHEMA_BASE[0], {"name": "amount", "type": "float64", "scale": 2, "unit": "EUR"}, _SCHEMA_BASE[2]]),
    _schema("schema-unit-change", "a unit change changes the schema hash", [_SCHEMA_BASE[0], _with(_SCHEMA_BASE[1], unit="USD"), _SCHEMA_BASE[2]]),
    _schema("schema-param-change", "a parameter change changes the schema hash", [_SCHEMA_BASE[0], _with(_SCHEMA_BASE[1], scale=3), _SCHEMA_BASE[2]]),
    _schema("schema-resolution-change", "a timestamp resolution change changes the schema hash",
            [_SCHEMA_BASE[0], _SCHEMA_BASE[1], _with(_SCHEMA_BASE[2], resolution="ns")]),
    _schema("schema-nullable-change", "a nullability change changes the schema hash",
            [_SCHEMA_BASE[0], _with(_SCHEMA_BASE[1], nullable=True), _SCHEMA_BASE[2]]),
    _schema("schema-order-change", "column order is part of the schema", [_SCHEMA_BASE[1], _SCHEMA_BASE[0], _SCHEMA_BASE[2]]),
    _schema("schema-key-change", "the natural key is part of the schema", _SCHEMA_BASE, key=["id", "ts"]),
)

_FRAUD_POLICY = {
    "salt": "fraud_v6",
    "modulus": 100,
    "splits": [{"name": "train", "upper": 80}, {"name": "validation", "upper": 90}, {"name": "test", "upper": 100}],
}


def _split(ident: str, rule: str, policy: dict[str, Any], identifiers: list[Any]) -> dict[str, Any]:
    return {"id": ident, "kind": SPLIT_ALGORITHM, "rule": rule, "policy": policy, "identifiers": identifiers}


SPLIT_CASES: tuple[dict[str, Any], ...] = (
    _split("split-fraud-v6", "bucket = int(sha256(salt + ':' + NFC(id))) % modulus; NFD and NFC spell one identifier; ints are base 10",
           _FRAUD_POLICY,
           [*(f"user-{i}" for i in range(1, 21)), "", "caf\u00e9", "cafe\u0301", "\u00c5", "A\u030a", "\u212b", "\u65e5\u672c", "\U0001F600",
            "42", 42, 0, -7, 2**63 - 1, "fraud_v6:x", " spaced "]),
    _split("split-modulus-1000", "another salt and modulus",
           {"salt": "exp-\u00e9", "modulus": 1000, "splits": [{"name": "a", "upper": 500}, {"name": "b", "upper": 1000}]},
           ["a", "b", "c", "e\u0301", 1, 2, 3]),
    _split("split-error-bool", "a bool identifier is an error", _FRAUD_POLICY, [True]),
    _split("split-error-null", "a null identifier is an error", _FRAUD_POLICY, ["a", None]),
)

EXAMPLE_ID_KIND = "example-id"
_METERS = _contract("readings", ["meter_id", "read_at"], [
    {"name": "meter_id", "type": "string"}, {"name": "read_at", "type": "timestamp", "resolution": "us"}, {"name": "kwh", "type": "int64"}])
_PAIRS = _contract("pairs", ["a", "b"], [{"name": "a", "type": "string"}, {"name": "b", "type": "string"}])
_TYPED = _contract("typed", ["site", "day", "ok", "amount"], [
    {"name": "site", "type": "int32"}, {"name": "day", "type": "date"}, {"name": "ok", "type": "bool"},
    {"name": "amount", "type": "decimal", "precision": 9, "scale": 2}, {"name": "note", "type": "string", "nullable": True}])


def _example_ids(ident: str, rule: str, contract: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": ident, "kind": EXAMPLE_ID_KIND, "rule": rule, "contract": contract, "rows": rows, "policy": _FRAUD_POLICY}


EXAMPLE_ID_CASES: tuple[dict[str, Any], ...] = (
    _example_ids("example-id-meters", "a composite key's example id: each key column's canonical text, in key order, joined by TAB; "
                 "hash-split/1 hashes it as a string identifier; the assignment hash reads it as the id column", _METERS,
                 [{"meter_id": "m-1", "read_at": _ts(1773446400000000, "us"), "kwh": 3},
                  {"meter_id": "m-1", "read_at": _ts(1773450000000000, "us"), "kwh": 4},
                  {"meter_id": "tab\there", "read_at": _ts(0, "us"), "kwh": 5},
                  {"meter_id": "back\\slash lf\n", "read_at": _ts(-1, "us"), "kwh": 6},
                  {"meter_id": "cafe\u0301", "read_at": _ts(1, "us"), "kwh": 7}]),
    _example_ids("example-id-injective", "escapes keep the join injective: ('a\\tb', 'c') and ('a', 'b\\tc') differ", _PAIRS,
                 [{"a": "a\tb", "b": "c"}, {"a": "a", "b": "b\tc"}, {"a": "", "b": ""}, {"a": "\\N", "b": "x"}]),
    _example_ids("example-id-typed", "integer, date, bool and decimal key columns; non-key columns take no part", _TYPED,
                 [{"site": -7, "day": "2026-03-14", "ok": True, "amount": "-0.50", "note": None},
                  {"site": 12, "day": "1970-01-01", "ok": False, "amount": "1234.00", "note": "x"}]),
    _example_ids("example-id-error-null", "a null key column is an error (no example id)", _PAIRS, [{"a": "a", "b": None}]),
)
