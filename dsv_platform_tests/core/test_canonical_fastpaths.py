"""The vectorized fast paths of canonical.py / hashing.py equal a per-value Python reference.

The reference below formats every value with plain Python straight from
docs/canonical-encoding.md; random data covers the escapes, nulls, sliced arrays
(non-zero offsets), chunked arrays and empty arrays.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity.canonical import encode_column, encode_rows, join_lines
from dsv_platform.core.identity.hashing import canonical_bytes, hash_partition, sort_by_key

_ESC = {"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_ALPHABET = [*"ab\\\b\f\n\r\t\v é€", "\x00", "N"]


def ref_string(value: str | None) -> str:
    return "\\N" if value is None else "".join(_ESC.get(ch, ch) for ch in value)


def ref_decimal(value: Decimal | None, scale: int) -> str:
    if value is None:
        return "\\N"
    unscaled = int(value.scaleb(scale))
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return sign + (digits[:-scale] + "." + digits[-scale:] if scale else digits)


def ref_float(value: float | None, scale: int) -> str:
    if value is None:
        return "\\N"
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    text = f"{value:.{scale}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def _column(**kw: object):  # type: ignore[no-untyped-def]
    doc = {"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}, {"name": "v", **kw}]}
    contract = parse_contract(doc)
    return contract, contract.column("v")


def _encode(values: pa.Array | pa.ChunkedArray, **kw: object) -> list[str]:
    _, column = _column(**kw)
    table = pa.table({"id": pa.array(np.arange(len(values)), pa.int64()), "v": values})
    return encode_column(values, column, table=table, key=("id",)).to_pylist()


def _random_strings(rng: np.random.Generator, n: int, null_rate: float) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        if rng.random() < null_rate:
            out.append(None)
        else:
            out.append("".join(rng.choice(_ALPHABET, size=int(rng.integers(0, 8)))))
    return out


def _variants(values: list, arrow_type: pa.DataType):  # type: ignore[no-untyped-def]
    """(expected python values, arrow input): plain, sliced with an offset, chunked, empty."""
    arr = pa.array(values, arrow_type)
    yield values, arr
    yield values[3:-2], arr.slice(3, len(values) - 5)
    yield values, pa.chunked_array([arr.slice(0, 7), arr.slice(7)])
    yield [], arr.slice(0, 0)


@pytest.mark.parametrize("seed", range(5))
def test_canonical_fastpaths_strings_match_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = _random_strings(rng, 300, 0.2)
    for expected, arr in _variants(values, pa.string()):
        assert _encode(arr, type="string", nullable=True) == [ref_string(v) for v in expected]


def test_canonical_fastpaths_strings_without_specials_are_unchanged() -> None:
    values = ["plain", "", "é€", None, "N"]
    assert _encode(pa.array(values), type="string", nullable=True) == [ref_string(v) for v in values]


@pytest.mark.parametrize("scale", [0, 1, 2, 5, 9])
@pytest.mark.parametrize("seed", range(3))
def test_canonical_fastpaths_decimals_match_reference(scale: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    unscaled = np.concatenate([rng.integers(-(10**17), 10**17, 200), rng.integers(-(10**scale) - 2, 10**scale + 2, 100), [0, 1, -1, 10**17, -(10**17)]])
    values: list[Decimal | None] = [Decimal(int(u)).scaleb(-scale) for u in unscaled]
    values[5] = None
    for expected, arr in _variants(values, pa.decimal128(18, scale)):
        assert _encode(arr, type="decimal", precision=18, scale=scale, nullable=True) == [ref_decimal(v, scale) for v in expected]


def test_canonical_fastpaths_wide_decimals_match_reference() -> None:
    values = [Decimal("0.0000001"), Decimal("-0.0000001"), Decimal("12345678901234567890.1234567"), None, Decimal(0)]
    expected = [ref_decimal(v, 7) for v in values]
    assert _encode(pa.array(values, pa.decimal128(38, 7)), type="decimal", precision=38, scale=7, nullable=True) == expected


@pytest.mark.parametrize("scale", [0, 2, 6])
def test_canonical_fastpaths_floats_match_reference(scale: int) -> None:
    rng = np.random.default_rng(scale)
    specials = [0.5, 1.5, 2.5, -0.5, -0.0, 0.125, 1e-9, -1e-9, float("nan"), float("inf"), -float("inf"), 1e300]
    values: list[float | None] = [*rng.normal(0, 1000, 300), *specials]
    values[3] = None
    for expected, arr in _variants(values, pa.float64()):
        assert _encode(arr, type="float64", scale=scale, nullable=True) == [ref_float(v, scale) for v in expected]


def _table_and_contract(n: int, seed: int, shuffle: bool = True):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).astype(np.int64) * 3 - n if shuffle else np.arange(n, dtype=np.int64)
    notes = _random_strings(rng, n, 0.3)
    codes = [["EUR", "USD", "GBP"][i] for i in rng.integers(0, 3, n)]
    amounts = [Decimal(int(u)).scaleb(-2) for u in rng.integers(-500, 500, n)]
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "code": pa.array(codes, pa.string()),
            "amount": pa.array(amounts, pa.decimal128(18, 2)),
            "flag": pa.array(rng.random(n) < 0.5),
            "note": pa.array(notes, pa.string()),
        }
    )
    contract = parse_contract(
        {
            "name": "t",
            "key": ["id"],
            "columns": [
                {"name": "id", "type": "int64"},
                {"name": "code", "type": "string"},
                {"name": "amount", "type": "decimal", "precision": 18, "scale": 2},
                {"name": "flag", "type": "bool"},
                {"name": "note", "type": "string", "nullable": True},
            ],
        }
    )
    return table, contract


def ref_canonical(table: pa.Table) -> bytes:
    rows = sorted(table.to_pylist(), key=lambda r: r["id"])
    lines = [
        "\t".join([str(r["id"]), ref_string(r["code"]), ref_decimal(r["amount"], 2), "t" if r["flag"] else "f", ref_string(r["note"])]) + "\n"
        for r in rows
    ]
    return "".join(lines).encode("utf-8")


@pytest.mark.parametrize(("n", "chunk_rows", "shuffle"), [(0, 64, True), (1, 64, True), (500, 64, True), (500, 1 << 18, False), (333, 50, False)])
def test_canonical_fastpaths_rows_match_reference(n: int, chunk_rows: int, shuffle: bool) -> None:
    table, contract = _table_and_contract(n, n, shuffle)
    expected = ref_canonical(table)
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=37)) if n else table
    for candidate in (table, chunked, table.slice(0, n)):
        from dsv_platform.core.identity.hashing import iter_canonical_chunks

        assert b"".join(bytes(c) for c in iter_canonical_chunks(candidate, contract, chunk_rows=chunk_rows)) == expected
    assert canonical_bytes(table, contract) == expected
    assert hash_partition(chunked, contract).hash == hashlib.sha256(expected).hexdigest()


def test_canonical_fastpaths_encode_rows_gives_one_line_per_row() -> None:
    table, contract = _table_and_contract(50, 1)
    lines = encode_rows(table.slice(5, 20), contract).to_pylist()
    assert len(lines) == 20 and all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    assert join_lines([pa.array(["x", "y"]), pa.array(["1", ""])]).to_pylist() == ["x\t1\n", "y\t\n"]
    assert join_lines([pa.array(["only"])]).to_pylist() == ["only\n"]


@pytest.mark.parametrize("key_type", [pa.int64(), pa.int32(), pa.uint64(), pa.timestamp("us", tz="UTC"), pa.date32(), pa.string()])
def test_canonical_fastpaths_sort_matches_arrow_sort(key_type: pa.DataType) -> None:
    rng = np.random.default_rng(3)
    raw = rng.permutation(1000).astype(np.int64) * 1_000_003
    if pa.types.is_string(key_type):
        values = pa.array([f"k{v:012d}" for v in raw])
    elif pa.types.is_date32(key_type):
        values = pa.array(raw.astype(np.int32)).view(key_type)
    else:
        values = pa.array(raw).cast(key_type)
    table = pa.table({"id": values})
    contract = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}]})
    expected = pa.compute.sort_indices(table, sort_keys=[("id", "ascending")]).to_pylist()
    assert sort_by_key(table, contract).to_pylist() == expected


def test_canonical_fastpaths_sort_handles_extreme_integer_keys() -> None:
    values = [2**63 - 1, -(2**63), 0, 5, -5]
    table = pa.table({"id": pa.array(values, pa.int64())})
    contract = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}]})
    assert sort_by_key(table, contract).to_pylist() == sorted(range(5), key=lambda i: values[i])


def test_canonical_fastpaths_duplicate_key_is_refused_with_its_value() -> None:
    table = pa.table({"id": pa.array([5, 3, 9, 3], pa.int64())})
    contract = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "int64"}]})
    with pytest.raises(ContractViolationError, match="duplicate natural key") as info:
        sort_by_key(table, contract)
    assert info.value.row_key == 3


@pytest.mark.parametrize(("key_type", "name"), [(pa.int64(), "int64"), (pa.date32(), "date"), (pa.timestamp("us", tz="UTC"), "timestamp")])
def test_canonical_fastpaths_a_table_of_no_chunks_hashes_as_the_empty_partition(key_type: pa.DataType, name: str) -> None:
    """A filter that keeps nothing gives columns of zero chunks: the same digest as an empty single-chunk table."""
    contract = parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": name, **({"resolution": "us"} if name == "timestamp" else {})}]})
    no_chunks = pa.Table.from_batches([], pa.schema([("id", key_type)]))
    one_empty = pa.table({"id": pa.array([], key_type)})
    assert no_chunks.column("id").num_chunks == 0
    assert hash_partition(no_chunks, contract) == hash_partition(one_empty, contract)
