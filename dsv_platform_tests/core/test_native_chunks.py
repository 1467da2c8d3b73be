"""The compiled row encoder at chunk boundaries: tables of many small chunks give the pure path's bytes.

The encoder finds each row's chunk once per chunk layout (columns cut the
same way share one) through a block table, without a search. These tests cut
every column into chunks of 1, 2, 3, 7 and odd sizes, with empty chunks,
sliced chunks, nulls on the first and last row of chunks, columns cut
differently from each other, every prefetch distance, and check the
conformance vectors with their tables cut into one-row chunks.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform import _native
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.identity import canonical_native
from dsv_platform.core.identity.conformance import table_from_rows
from dsv_platform.core.identity.hashing import canonical_bytes, hash_partition, hash_table, iter_canonical_chunks
from dsv_platform_tests.core.test_native_rowtext import COLUMNS, _both, _contract, _table

pytestmark = pytest.mark.skipif(not _native.available, reason="the compiled row encoder is not built")

PATTERNS = {
    "ones": [1],
    "twos": [2],
    "threes": [3],
    "sevens": [7],
    "odd": [5, 1, 9, 3, 13],
    "with_empty": [1, 0, 2, 0, 0, 3],
    "empty_first": [0, 0, 4, 1],
    "uneven": [1, 1, 1, 61, 2, 0, 17],
}


def _bounds(n: int, pattern: list[int], skip: int = 0) -> list[tuple[int, int]]:
    """(start, end) chunk bounds covering ``0..n`` by repeating ``pattern`` (rotated by ``skip``), empty chunks included."""
    sizes = itertools.cycle(pattern[skip % len(pattern) :] + pattern[: skip % len(pattern)])
    out, at = [], 0
    while at < n:
        size = next(sizes)
        out.append((at, min(n, at + size)))
        at += size
    out.append((n, n))  # a trailing empty chunk
    return out


def _cut(table: pa.Table, pattern: list[int], *, per_column: bool = False) -> pa.Table:
    """Every column cut into chunks following ``pattern``; ``per_column``: each column cut differently."""
    columns = {}
    for k, name in enumerate(table.column_names):
        arr = table.column(name).combine_chunks()
        bounds = _bounds(len(arr), pattern, k if per_column else 0)
        columns[name] = pa.chunked_array([_piece(arr, a, b, j) for j, (a, b) in enumerate(bounds)], type=arr.type)
    return pa.table(columns)


def _piece(arr: pa.Array, a: int, b: int, j: int) -> pa.Array:
    """Rows a..b: a slice of ``arr`` (non-zero offset) for odd ``j``, else a copy in buffers of its own (a read past the chunk is garbage)."""
    part = arr.slice(a, b - a)
    return part if j % 2 else part.take(pa.array(np.arange(b - a), pa.int64()))


def _nulls_at_edges(table: pa.Table, pattern: list[int]) -> pa.Table:
    """Nulls on the first and last row of every chunk of ``pattern`` (nullable columns only)."""
    edges = np.zeros(table.num_rows, dtype=bool)
    for a, b in _bounds(table.num_rows, pattern):
        if b > a:
            edges[a] = edges[b - 1] = True
    mask = pa.array(edges)
    nullable = {c["name"] for c in COLUMNS if c.get("nullable")}
    columns = {}
    for name in table.column_names:
        values = table.column(name).combine_chunks()
        columns[name] = pc.if_else(mask, pa.scalar(None, values.type), values) if name in nullable else values
    return pa.table(columns)


def _run(table: pa.Table, chunk_rows: int) -> tuple[bytes, str]:
    contract = _contract()
    text = b"".join(bytes(c) for c in iter_canonical_chunks(table, contract, chunk_rows=chunk_rows))
    return text, hash_partition(table, contract).hash


@pytest.mark.parametrize("pattern", list(PATTERNS), ids=list(PATTERNS))
def test_native_chunks_every_type_in_small_chunks_match_pure(pattern: str) -> None:
    base = _table(90, 31, null_rate=0.1)
    table = _cut(base, PATTERNS[pattern])
    (native, native_hash), (pure, pure_hash) = _both(lambda: _run(table, 16))
    assert native == pure
    assert native_hash == pure_hash == hashlib.sha256(pure).hexdigest()
    assert pure == canonical_bytes(base, _contract())


@pytest.mark.parametrize("pattern", ["ones", "threes", "odd", "with_empty"])
def test_native_chunks_nulls_at_chunk_edges_match_pure(pattern: str) -> None:
    table = _cut(_nulls_at_edges(_table(70, 41, null_rate=0.0), PATTERNS[pattern]), PATTERNS[pattern])
    native, pure = _both(lambda: _run(table, 11))
    assert native == pure


@pytest.mark.parametrize("pattern", ["twos", "odd", "uneven"])
def test_native_chunks_columns_cut_differently_match_pure(pattern: str) -> None:
    table = _cut(_table(80, 43), PATTERNS[pattern], per_column=True)
    native, pure = _both(lambda: _run(table, 7))
    assert native == pure


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 64])
def test_native_chunks_sorted_and_sliced_inputs_match_pure(chunk_rows: int) -> None:
    base = _table(75, 47)
    for table in (_cut(base.sort_by("id"), [3, 0, 5]), _cut(base, [4, 1]).slice(9, 50), _cut(base.sort_by("id"), [2]).slice(3, 60)):
        native, pure = _both(lambda: _run(table, chunk_rows))  # noqa: B023 - called at once
        assert native == pure


@pytest.mark.parametrize("distances", [(0, 0), (1, 0), (1, 1), (3, 2), (16, 8), (1024, 1024)])
def test_native_chunks_every_prefetch_distance_gives_the_same_bytes(distances: tuple[int, int]) -> None:
    table = _cut(_table(60, 53), [1, 2, 0, 3], per_column=True)
    previous = _native._rowtext._set_prefetch_distance(*distances)
    try:
        native, pure = _both(lambda: _run(table, 25))
    finally:
        _native._rowtext._set_prefetch_distance(*previous)
    assert native == pure


def test_native_chunks_large_many_chunk_table_matches_one_chunk() -> None:
    """Thousands of rows in 80 uneven chunks (a spilled partition), against the same rows as one chunk."""
    base = _table(4000, 59, null_rate=0.15)
    sizes = [int(s) for s in np.random.default_rng(59).integers(0, 101, 80)]
    table = _cut(base, sizes)
    native, pure = _both(lambda: _run(table, 1000))
    one, _ = _both(lambda: _run(base, 1000))
    assert native == pure == one


def test_native_chunks_encode_checks_rows_of_many_chunk_columns() -> None:
    values = pa.chunked_array([pa.array([], pa.int64()), pa.array([1, 2], pa.int64()), pa.array([], pa.int64()), pa.array([3], pa.int64())])
    col = (_native.INT, 8, 1, False, [(len(c), c.offset, None, c.buffers()[1] if len(c) else pa.py_buffer(b""), None) for c in values.chunks])
    assert bytes(_native.encode([col], np.array([2, 0, 1], np.int64), 0, 3)) == b"3\n1\n2\n"
    assert bytes(_native.encode([col, col], None, 1, 2)) == b"2\t2\n3\t3\n"
    for bad in ([3], [-1], [0, 1, 2, 3]):
        with pytest.raises(IndexError):
            _native.encode([col], np.array(bad, np.int64), 0, len(bad))


def _row_vectors() -> list[dict]:  # type: ignore[type-arg]
    doc = json.loads(resources.files("dsv_platform.conformance").joinpath("vectors.json").read_text(encoding="utf-8"))
    return [v for v in doc["vectors"] if v["kind"] == "rows" and "partitions" in v["expected"]]


def test_native_chunks_conformance_vectors_in_one_row_chunks() -> None:
    vectors = _row_vectors()
    assert vectors
    previous = canonical_native.set_native(True)
    try:
        for vector in vectors:
            contract = parse_contract(vector["contract"])
            table = table_from_rows(contract, vector["rows"])
            if table.num_rows:
                table = _cut(table, [1, 0])
            digest = hash_table(table, contract, partition_by=vector.get("partition_by"))
            expected = vector["expected"]
            assert digest.content_hash == expected["content_hash"], vector["id"]
            assert [(p.key, p.hash) for p in digest.partitions] == [(p["key"], p["hash"]) for p in expected["partitions"]], vector["id"]
    finally:
        canonical_native.set_native(previous)
