"""The whole-row gather (dsv_platform/core/identity/row_gather.py) gives the pure path's bytes, at every boundary.

Rows out of key order are cut into key-range buckets, each bucket encoded in
storage order in segments, and whole rows copied in key order in blocks.
These tests shrink buckets, segments and blocks to a few rows so every
boundary is crossed many times, on random tables of every type (chunked or
not), check that the gather really ran, that already-sorted input skips it,
that a bad value in a late bucket gives the pure path's error, and that the
compiled gather refuses out-of-range rows and malformed row ends.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from dsv_platform import _native
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity import hashing, row_gather
from dsv_platform.core.identity.hashing import canonical_bytes, hash_partition, hash_table
from dsv_platform_tests.core.test_native_rowtext import _both, _chunked, _contract, _table

pytestmark = pytest.mark.skipif(not _native.available, reason="the compiled row encoder is not built")


@pytest.fixture
def gathers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int, int, int], list[int]]]:
    """``set(bucket_bytes, segments, block_rows)`` shrinks the gather's sizes; returns the list counting gathered rows."""
    counted: list[int] = []
    real = _native.gather

    def counting(texts: list[object], seg_rows: int, ends: object, order: object, start: int, count: int) -> object:
        counted.append(count)
        return real(texts, seg_rows, ends, order, start, count)

    def configure(bucket_bytes: int, segments: int, block_rows: int) -> list[int]:
        monkeypatch.setattr(row_gather, "MIN_ROWS", 1)
        monkeypatch.setattr(row_gather, "BUCKET_BYTES", bucket_bytes)
        monkeypatch.setattr(row_gather, "SEGMENTS", segments)
        monkeypatch.setattr(row_gather, "GATHER_ROWS", block_rows)
        monkeypatch.setattr(_native, "gather", counting)
        return counted

    yield configure


SIZES = [(1, 1, 1), (64, 2, 1), (512, 3, 7), (2048, 2, 8), (5000, 1, 64), (10**9, 2, 100_000)]


@pytest.mark.parametrize(("bucket_bytes", "segments", "block_rows"), SIZES)
@pytest.mark.parametrize("seed", [0, 1])
def test_gathered_bytes_equal_the_pure_path(
    gathers: Callable[[int, int, int], list[int]], bucket_bytes: int, segments: int, block_rows: int, seed: int
) -> None:
    counted = gathers(bucket_bytes, segments, block_rows)
    table, contract = _table(301, seed), _contract()
    native, pure = _both(lambda: canonical_bytes(table, contract))
    assert native == pure
    assert sum(counted) == table.num_rows  # every row came through the gather


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_chunked_tables_gather_like_the_pure_path(gathers: Callable[[int, int, int], list[int]], seed: int) -> None:
    gathers(700, 2, 5)
    rng = np.random.default_rng(seed)
    table, contract = _chunked(_table(240, seed), rng), _contract()
    native, pure = _both(lambda: (canonical_bytes(table, contract), hash_table(table, contract).content_hash))
    assert native == pure


def test_sorted_input_skips_the_gather(gathers: Callable[[int, int, int], list[int]]) -> None:
    counted = gathers(64, 2, 3)
    table, contract = _table(200, 5), _contract()
    ordered = table.take(hashing.sort_by_key(table, contract))
    native, pure = _both(lambda: canonical_bytes(ordered, contract))
    assert native == pure
    assert counted == []
    assert canonical_bytes(table, contract) == native  # the same rows out of order do go through the gather
    assert counted


def test_partition_hash_on_its_own_thread_equals_sha256_of_the_bytes(gathers: Callable[[int, int, int], list[int]]) -> None:
    gathers(256, 2, 3)
    table, contract = _table(500, 6), _contract()
    leaf = hash_partition(table, contract, key="all")
    assert leaf.hash == hashlib.sha256(canonical_bytes(table, contract)).hexdigest()
    assert leaf.rows == 500


def test_an_inexact_timestamp_in_a_late_bucket_is_the_pure_paths_error(gathers: Callable[[int, int, int], list[int]]) -> None:
    gathers(256, 2, 4)
    table, contract = _table(300, 7, null_rate=0.0), _contract(["id", "s", "ts_ns_as_ms"])
    order = np.asarray(hashing.sort_by_key(table, contract))
    late = int(order[-3])  # near the end of the key order: many buckets are gathered first
    values = table.column("ts_ns_as_ms").combine_chunks().view(pa.int64()).to_numpy().copy()
    values[late] += 1  # one nanosecond: not a whole millisecond
    bad = table.set_column(table.column_names.index("ts_ns_as_ms"), "ts_ns_as_ms", pa.array(values, pa.timestamp("ns", tz="Europe/Paris")))

    def error() -> str:
        with pytest.raises(ContractViolationError) as caught:
            canonical_bytes(bad, contract)
        return str(caught.value)

    native, pure = _both(error, strict=False)
    assert native == pure
    assert "ts_ns_as_ms" in native


def test_storage_positions_recover_the_key_order() -> None:
    rng = np.random.default_rng(8)
    for keyed in (rng.permutation(1000).astype(np.int64), np.array([2**61, 5, 2**62, 0], dtype=np.int64), np.array([], dtype=np.int64)):
        rows, where = row_gather.storage_positions(keyed)
        assert list(rows) == sorted(keyed.tolist())
        assert list(rows[where]) == keyed.tolist()


def test_bucket_bounds_cover_every_row_once() -> None:
    for rows, table_bytes, bucket in ((10, 100, 30), (7, 1, 10**6), (1000, 10**6, 1), (5, 10**6, 10**5)):
        bounds = row_gather.bucket_bounds(rows, table_bytes, bucket)
        assert bounds[0][0] == 0 and bounds[-1][1] == rows
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in itertools.pairwise(bounds))


def test_the_compiled_gather_refuses_bad_rows_and_ends() -> None:
    text = b"a\nbb\nccc\n"
    ends = np.array([2, 5, 9], dtype=np.int64)
    assert bytes(_native.gather([text], 3, ends, np.array([2, 0, 1], dtype=np.int64), 0, 3)) == b"ccc\na\nbb\n"
    assert bytes(_native.gather([b"a\nbb\n", b"ccc\n"], 2, np.array([2, 5, 4], dtype=np.int64), np.array([2, 1, 0], dtype=np.int64), 0, 3)) == b"ccc\nbb\na\n"
    assert bytes(_native.gather([text], 3, ends, np.array([1], dtype=np.int64), 0, 0)) == b""
    with pytest.raises(IndexError, match="row 1"):
        _native.gather([text], 3, ends, np.array([0, 3], dtype=np.int64), 0, 2)
    with pytest.raises(IndexError, match="row 0"):
        _native.gather([text], 3, np.array([2, 1, 9], dtype=np.int64), np.array([1], dtype=np.int64), 0, 1)
    with pytest.raises(IndexError, match="row 0"):
        _native.gather([text], 3, np.array([2, 5, 10], dtype=np.int64), np.array([2], dtype=np.int64), 0, 1)
    with pytest.raises(IndexError):
        _native.gather([text], 3, ends, np.array([0], dtype=np.int64), 0, 2)
    with pytest.raises(ValueError, match="seg_rows"):
        _native.gather([text], 0, ends, np.array([0], dtype=np.int64), 0, 1)
