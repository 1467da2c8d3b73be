"""The compiled row encoder (dsv_platform/_native/rowtext.c) gives the pure path's bytes, byte for byte.

The pure numpy/Arrow encoder is the reference. Random tables cover every
logical type (and the Arrow layouts each accepts), nulls, every COPY escape,
non-ASCII text, sliced and chunked columns, empty and one-column tables and
random row orders; the conformance vectors pass with the native path on and
off; errors are the pure path's errors.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from collections.abc import Iterator
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from dsv_platform import _native
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity import canonical_native, hashing
from dsv_platform.core.identity.conformance import build_vectors, check_vectors
from dsv_platform.core.identity.hashing import canonical_bytes, hash_partition, iter_canonical_chunks

pytestmark = pytest.mark.skipif(not _native.available, reason="the compiled row encoder is not built")

_ALPHABET = [*"ab\\\b\f\n\r\t\v éß€😀", "\x00", "N", "\\N", "x" * 30]


@pytest.fixture
def native_on() -> Iterator[None]:
    previous = canonical_native.set_native(True)
    yield
    canonical_native.set_native(previous)


def _no_pure_rows(*args: object, **kwargs: object) -> None:
    raise AssertionError("the native run fell back to the pure row encoder")


def _both(fn, strict: bool = True):  # type: ignore[no-untyped-def]
    """``fn()`` with the native path, then with the pure path (restoring the setting).

    ``strict``: the native run must not fall back to the pure row encoder.
    """
    previous = canonical_native.set_native(True)
    try:
        if strict:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(hashing, "encode_rows", _no_pure_rows)
                native = fn()
        else:
            native = fn()
        canonical_native.set_native(False)
        pure = fn()
    finally:
        canonical_native.set_native(previous)
    return native, pure


def _strings(rng: np.random.Generator, n: int, null_rate: float) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        if rng.random() < null_rate:
            out.append(None)
        else:
            out.append("".join(rng.choice(_ALPHABET, size=int(rng.integers(0, 9)))))
    return out


def _nulls(rng: np.random.Generator, values: list, rate: float) -> list:  # type: ignore[type-arg]
    return [None if rng.random() < rate else v for v in values]


COLUMNS = [
    {"name": "id", "type": "int64"},
    {"name": "i8", "type": "int8", "nullable": True},
    {"name": "i16", "type": "int16", "nullable": True},
    {"name": "i32", "type": "int32", "nullable": True},
    {"name": "u8", "type": "uint8", "nullable": True},
    {"name": "u16", "type": "uint16", "nullable": True},
    {"name": "u32", "type": "uint32", "nullable": True},
    {"name": "u64", "type": "uint64", "nullable": True},
    {"name": "flag", "type": "bool", "nullable": True},
    {"name": "s", "type": "string", "nullable": True},
    {"name": "ls", "type": "string", "nullable": True},
    {"name": "d2", "type": "decimal", "precision": 18, "scale": 2, "nullable": True},
    {"name": "d0", "type": "decimal", "precision": 10, "scale": 0, "nullable": True},
    {"name": "d38", "type": "decimal", "precision": 38, "scale": 9, "nullable": True},
    {"name": "d50", "type": "decimal", "precision": 50, "scale": 4, "nullable": True},
    {"name": "dint", "type": "decimal", "precision": 12, "scale": 3, "nullable": True},
    {"name": "f64", "type": "float64", "scale": 3, "nullable": True},
    {"name": "f32", "type": "float32", "scale": 1, "nullable": True},
    {"name": "ts_us", "type": "timestamp", "resolution": "us", "nullable": True},
    {"name": "ts_ns_as_ms", "type": "timestamp", "resolution": "ms", "nullable": True},
    {"name": "ts_s_as_ns", "type": "timestamp", "resolution": "ns", "nullable": True},
    {"name": "day", "type": "date", "nullable": True},
    {"name": "bin", "type": "binary", "nullable": True},
    {"name": "lbin", "type": "binary", "nullable": True},
    {"name": "fbin", "type": "binary", "nullable": True},
]


def _contract(names: list[str] | None = None, key: str = "id") -> Contract:
    cols = [c for c in COLUMNS if names is None or c["name"] in names]
    return parse_contract({"name": "t", "key": [key], "columns": cols})


def _table(n: int, seed: int, null_rate: float = 0.2) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).astype(np.int64) * 5 - 2 * n

    def ints(lo: int, hi: int, t: pa.DataType) -> pa.Array:
        vals = [int(v) for v in rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if lo < 0 else np.uint64)]
        if n:
            vals[0] = lo
            vals[-1] = hi
        return pa.array(_nulls(rng, vals, null_rate), t)

    def dec(digits: int, scale: int, t: pa.DataType) -> pa.Array:
        vals = []
        for _ in range(n):
            width = int(rng.integers(1, digits + 1))
            unscaled = int("".join(str(d) for d in rng.integers(0, 10, width))) * (-1 if rng.random() < 0.4 else 1)
            vals.append(Decimal(unscaled).scaleb(-scale))
        if n > 2:
            vals[1] = Decimal(0)
            vals[2] = Decimal(-1).scaleb(-scale)
        return pa.array(_nulls(rng, vals, null_rate), t)

    strings = _strings(rng, n, null_rate)
    floats = list(rng.normal(0, 1000, n))
    special = [0.5, 1.5, -0.5, -0.0, 2.5e-4, float("nan"), float("inf"), -float("inf"), 1e300, 0.0005]
    for i, v in enumerate(special[: max(n - 1, 0)]):
        floats[i + 1] = v
    with np.errstate(over="ignore"):
        floats32 = [float(np.float32(v)) for v in floats]
    binaries = [bytes(rng.integers(0, 256, int(rng.integers(0, 6)), dtype=np.uint8)) for _ in range(n)]
    ms = rng.integers(-(10**12), 9 * 10**12, n) * 1_000_000  # ns counts, whole milliseconds
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i8": ints(-128, 127, pa.int8()),
            "i16": ints(-(2**15), 2**15 - 1, pa.int16()),
            "i32": ints(-(2**31), 2**31 - 1, pa.int32()),
            "u8": ints(0, 255, pa.uint8()),
            "u16": ints(0, 2**16 - 1, pa.uint16()),
            "u32": ints(0, 2**32 - 1, pa.uint32()),
            "u64": ints(0, 2**64 - 1, pa.uint64()),
            "flag": pa.array(_nulls(rng, list(rng.random(n) < 0.5), null_rate), pa.bool_()),
            "s": pa.array(strings, pa.string()),
            "ls": pa.array(_strings(rng, n, null_rate), pa.large_string()),
            "d2": dec(18, 2, pa.decimal128(18, 2)),
            "d0": dec(10, 0, pa.decimal128(10, 0)),
            "d38": dec(38, 9, pa.decimal128(38, 9)),
            "d50": dec(50, 4, pa.decimal256(50, 4)),
            "dint": ints(-(2**15), 2**15 - 1, pa.int16()),
            "f64": pa.array(_nulls(rng, floats, null_rate), pa.float64()),
            "f32": pa.array(_nulls(rng, floats32, null_rate), pa.float32()),
            "ts_us": pa.array(_nulls(rng, [int(v) for v in rng.integers(-(2**62), 2**62, n)], null_rate), pa.timestamp("us", tz="UTC")),
            "ts_ns_as_ms": pa.array(_nulls(rng, [int(v) for v in ms], null_rate), pa.timestamp("ns", tz="Europe/Paris")),
            "ts_s_as_ns": pa.array(_nulls(rng, [int(v) for v in rng.integers(-(10**10), 10**10, n)], null_rate), pa.timestamp("s", tz="UTC")),
            "day": pa.array(
                _nulls(rng, [dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(-700_000, 2_900_000, n)], null_rate), pa.date32()
            ),
            "bin": pa.array(_nulls(rng, binaries, null_rate), pa.binary()),
            "lbin": pa.array(_nulls(rng, binaries[::-1], null_rate), pa.large_binary()),
            "fbin": pa.array(_nulls(rng, [bytes(rng.integers(0, 256, 3, dtype=np.uint8)) for _ in range(n)], null_rate), pa.binary(3)),
        }
    )


def _chunked(table: pa.Table, rng: np.random.Generator) -> pa.Table:
    """The same rows, every column cut into random chunks (some empty, some sliced)."""
    n = table.num_rows
    columns = {}
    for name in table.column_names:
        arr = table.column(name).combine_chunks()
        cuts = sorted(int(c) for c in rng.integers(0, n + 1, 4)) if n else []
        bounds = [0, *cuts, n]
        columns[name] = pa.chunked_array([arr.slice(a, b - a) for a, b in itertools.pairwise(bounds)], type=arr.type)
    return pa.table(columns)


def test_native_rowtext_plan_covers_the_compiled_kinds(native_on: None) -> None:
    plan = canonical_native.native_rows(_table(20, 0), _contract())
    assert plan is not None
    text_columns = [s.name for s in plan.specs if not isinstance(s, tuple)]
    assert sorted(text_columns) == ["d50", "day", "dint", "f32", "f64", "fbin"]


@pytest.mark.parametrize("seed", range(6))
def test_native_rowtext_random_tables_match_pure(seed: int) -> None:
    table, contract = _table(257, seed), _contract()
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure
    assert pure.count(b"\n") == 257


@pytest.mark.parametrize("seed", range(4))
def test_native_rowtext_chunked_sliced_and_small_chunks_match_pure(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    big = _table(400, seed)
    table = _chunked(big.slice(17, 350), rng)  # non-zero offsets, many chunks, some empty
    contract = _contract()

    def run() -> tuple[bytes, str]:
        chunks = b"".join(bytes(c) for c in iter_canonical_chunks(table, contract, chunk_rows=37))
        return chunks, hash_partition(table, contract).hash

    (native, native_hash), (pure, pure_hash) = _both(run)
    assert native == pure
    assert native_hash == pure_hash == hashlib.sha256(pure).hexdigest()


def test_native_rowtext_sorted_input_uses_no_permutation() -> None:
    table = _table(300, 7).sort_by("id")
    contract = _contract()
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure


@pytest.mark.parametrize("null_rate", [0.0, 1.0])
def test_native_rowtext_no_nulls_and_all_nulls(null_rate: float) -> None:
    table = _table(120, 3, null_rate=null_rate)
    contract = _contract()
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure


def test_native_rowtext_empty_table() -> None:
    table = _table(0, 1)
    contract = _contract()
    native, pure = _both(lambda: (canonical_bytes(table, contract), hash_partition(table, contract).hash))
    assert native == pure == (b"", hashlib.sha256(b"").hexdigest())


@pytest.mark.parametrize("name", [c["name"] for c in COLUMNS if c["name"] != "id"])
def test_native_rowtext_two_column_tables(name: str) -> None:
    table = _table(150, 11).select(["id", name])
    contract = _contract(["id", name])
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure


@pytest.mark.parametrize("key_type", ["int64", "string"])
def test_native_rowtext_one_column_tables(key_type: str) -> None:
    rng = np.random.default_rng(5)
    if key_type == "int64":
        values = pa.array(rng.permutation(500).astype(np.int64) - 250)
    else:
        uniq = sorted({s for s in _strings(rng, 600, 0.0) if s is not None})
        values = pa.array([uniq[i] for i in rng.permutation(len(uniq))], pa.string())
    table = pa.table({"k": values})
    contract = parse_contract({"name": "one", "key": ["k"], "columns": [{"name": "k", "type": key_type}]})
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure


def test_native_rowtext_every_escape_and_non_ascii() -> None:
    texts = ["\\", "\b", "\f", "\n", "\r", "\t", "\v", "plain", "é€😀", "a\\b\tc\nd", "\x00\x01\x07\x0e\x1f\x7f", "", "x" * 40 + "\n" + "y" * 40]
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "s": pa.array(texts)})
    contract = _contract(["id", "s"])
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure
    assert native.split(b"\n")[:7] == [b"0\t\\\\", b"1\t\\b", b"2\t\\f", b"3\t\\n", b"4\t\\r", b"5\t\\t", b"6\t\\v"]


def test_native_rowtext_wide_decimal128_values() -> None:
    values = [Decimal("-99999999999999999999999999999.999999999"), Decimal("99999999999999999999999999999.999999999"),
              Decimal("0.000000001"), Decimal("-0.000000001"), Decimal("18446744073.709551616"), Decimal("-9223372036.854775809"), Decimal(0)]
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "d38": pa.array(values, pa.decimal128(38, 9))})
    contract = _contract(["id", "d38"])
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure
    assert native.split(b"\n")[0] == b"0\t-99999999999999999999999999999.999999999"


@pytest.mark.parametrize("enabled", [True, False])
def test_native_rowtext_conformance_vectors_pass(enabled: bool) -> None:
    previous = canonical_native.set_native(enabled)
    try:
        assert check_vectors(build_vectors()) == []
    finally:
        canonical_native.set_native(previous)


def _error(table: pa.Table, contract: Contract) -> str:
    with pytest.raises(ContractViolationError) as info:
        canonical_bytes(table, contract)
    return str(info.value)


def test_native_rowtext_errors_are_the_pure_errors() -> None:
    contract = _contract(["id", "ts_ns_as_ms", "s"])
    ids = pa.array([3, 1, 2], pa.int64())
    inexact = pa.table({"id": ids, "ts_ns_as_ms": pa.array([1_000_000, 2_000_001, 3_000_000], pa.timestamp("ns", tz="UTC")), "s": ["a", "b", "c"]})
    naive = pa.table({"id": ids, "ts_ns_as_ms": pa.array([1, 2, 3], pa.timestamp("ns")), "s": ["a", "b", "c"]})
    wrong = pa.table({"id": ids, "ts_ns_as_ms": pa.array([1, 2, 3], pa.timestamp("ns", tz="UTC")), "s": [1, 2, 3]})
    missing = pa.table({"id": ids, "s": ["a", "b", "c"]})
    not_null = pa.table({"id": ids, "ts_ns_as_ms": pa.array([1, 2, 3], pa.timestamp("ms", tz="UTC")), "s": ["a", "b", "c"]})
    not_null_contract = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}, {"name": "v", "type": "string"}]})
    with_null = pa.table({"id": ids, "v": ["a", None, "c"]})
    for table, c in [(inexact, contract), (naive, contract), (wrong, contract), (missing, contract), (with_null, not_null_contract)]:
        native, pure = _both(lambda: _error(table, c), strict=False)  # noqa: B023 - called at once
        assert native == pure
    native, pure = _both(lambda: canonical_bytes(not_null, contract))
    assert native == pure


def test_native_rowtext_buffer_bounds_are_checked() -> None:
    data = pa.array([1, 2, 3], pa.int64())
    col = (_native.INT, 8, 1, False, [(3, 0, None, data.buffers()[1], None)])
    assert bytes(_native.encode([col], None, 0, 3)) == b"1\n2\n3\n"
    assert bytes(_native.encode([col], np.array([2, 0], np.int64), 0, 2)) == b"3\n1\n"
    with pytest.raises(IndexError):
        _native.encode([col], np.array([0, 3], np.int64), 0, 2)
    with pytest.raises(IndexError):
        _native.encode([col], np.array([0], np.int64), 0, 2)
    with pytest.raises(ValueError):
        _native.encode([(_native.INT, 8, 1, False, [(4, 0, None, data.buffers()[1], None)])], None, 0, 1)
    strings = pa.array(["ab", "c"])
    bad_offsets = pa.py_buffer(np.array([0, 2, 99], np.int32))
    with pytest.raises(ValueError):
        _native.encode([(_native.STRING, 4, 0, False, [(2, 0, None, bad_offsets, strings.buffers()[2])])], None, 0, 2)
    assert bytes(_native.encode([], None, 0, 0)) == b""


def test_native_rowtext_can_be_switched_off() -> None:
    previous = canonical_native.set_native(False)
    try:
        assert canonical_native.native_rows(_table(5, 0), _contract()) is None
        assert not canonical_native.native_enabled()
    finally:
        canonical_native.set_native(previous)


@pytest.mark.parametrize("seed", range(3))
def test_native_rowtext_fixed_width_strings_and_binaries_match_pure(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    n = 300
    width_texts = ["".join(rng.choice(list("ab\\\t\nZé"), size=3)) for _ in range(n)]  # 'é' is 2 bytes: not all the same width
    codes = ["".join(rng.choice(list("AB\\\t\n\r"), size=4)) for _ in range(n)]  # every value 4 bytes, escapes inside
    blobs = [bytes(rng.integers(0, 256, 5, dtype=np.uint8)) for _ in range(n)]
    table = pa.table(
        {
            "id": pa.array(rng.permutation(n).astype(np.int64)),
            "s": pa.array(codes, pa.string()),
            "ls": pa.array(width_texts, pa.large_string()),
            "bin": pa.array(blobs, pa.binary()),
            "lbin": pa.array(blobs[::-1], pa.large_binary()),
        }
    )
    contract = _contract(["id", "s", "ls", "bin", "lbin"])
    plan = canonical_native.native_rows(table, contract)
    assert plan is not None
    widths = {c.name: spec[2] for c, spec in zip(contract.columns, plan.specs, strict=True)}
    assert widths["s"] == 4 and widths["bin"] == 5 and widths["lbin"] == 5
    for t in (table, table.slice(13, 250), _chunked(table.slice(5), rng)):
        native, pure = _both(lambda: canonical_bytes(t, contract))  # noqa: B023 - called at once
        assert native == pure
    # chunks of different widths, or a null: back to offsets, same bytes
    mixed = pa.table({"id": pa.array([2, 1, 3], pa.int64()), "s": pa.chunked_array([pa.array(["ab", "cd"]), pa.array(["xyz"])])})
    with_null = pa.table({"id": pa.array([2, 1, 3], pa.int64()), "s": pa.array(["ab", None, "cd"])})
    for t in (mixed, with_null):
        plan = canonical_native.native_rows(t, _contract(["id", "s"]))
        assert plan is not None and plan.specs[1][2] == 0
        native, pure = _both(lambda: canonical_bytes(t, _contract(["id", "s"])))  # noqa: B023 - called at once
        assert native == pure
