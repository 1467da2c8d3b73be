"""A part prepared from key-ordered tables (issue 22): the same partition hash and the same object bytes as the whole table.

The reference is the in-memory path every build used before: ``sorted_for_storage`` of the whole partition, ``hash_partition``
and ``parquet_bytes``. The streamed path gets the rows from the build engine's ``ORDER BY`` in tables of any size, across
Parquet row groups, for string, integer and composite keys, and must refuse what the whole path refuses (a duplicate key,
also when the two rows are in different tables) and rows that are not in key order across tables.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, load_table
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.errors import ContractViolationError, PublicationError
from dsv_platform.core.identity.hashing import hash_partition
from dsv_platform.core.identity.streaming import KeyOrderError, hash_key_ordered
from dsv_platform.services.publication.examples import EngineExamples
from dsv_platform.services.publication.parts import KeyOrderedRows, parquet_bytes, sorted_for_storage, spooled_part


def contract(key: str) -> Contract:
    columns = [
        {"name": "id", "type": "int64" if key == "int" else "string"},
        {"name": "meter", "type": "string"},
        {"name": "t", "type": "timestamp", "resolution": "us"},
        {"name": "day", "type": "date"},
        {"name": "value", "type": "float64", "scale": 6, "nullable": True},
    ]
    doc = {"name": "parts", "key": ["meter", "t"] if key == "composite" else ["id"], "columns": columns, "partition_by": "day"}
    return parse_contract(doc)


def rows(n: int, key: str, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    ids = pa.array(order * 7 - n) if key == "int" else pa.array([f"{chr(0x41 + i % 58)}{i:x}é\t{i % 3}" for i in order], pa.string())
    times = pa.array(np.int64(1_767_225_600_000_000) + order.astype(np.int64) * 977_000_000 // 3, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    meters = [f"m{int(v)}" for v in rng.integers(0, max(n // 20, 1), n)]
    values = [None if i % 11 == 3 else float(v) for i, v in enumerate(rng.random(n))]
    days = pa.array(np.full(n, np.datetime64("2026-06-01", "D")), pa.date32())
    return pa.table({"id": ids, "meter": meters, "t": times, "day": days, "value": values}).cast(contract(key).arrow_schema)


def in_tables(table: pa.Table, sizes: list[int]) -> Iterator[pa.Table]:
    start, i = 0, 0
    while start < table.num_rows:
        size = sizes[i % len(sizes)]
        yield table.slice(start, size)
        start, i = start + size, i + 1


@functools.cache
def whole_path(n: int, key: str) -> tuple[pa.Table, str, bytes]:
    """The reference, once per size and key for the cases below: the sorted partition, its hash and its object bytes."""
    c = contract(key)
    whole = sorted_for_storage(rows(n, key), c)
    return whole, hash_partition(whole, c, key="day=2026-06-01").hash, parquet_bytes(whole)


@pytest.mark.parametrize("key", ["string", "int", "composite"])
@pytest.mark.parametrize("sizes", [[1], [7, 1000, 3], [70_000], [300_000]])
def test_key_ordered_tables_give_the_whole_partitions_hash_and_bytes(tmp_path: Path, key: str, sizes: list[int]) -> None:
    n = 500 if sizes == [1] else 290_000  # a table per row; else past two row groups of 131,072
    c = contract(key)
    whole, reference, stored = whole_path(n, key)
    part = spooled_part("day=2026-06-01", KeyOrderedRows(lambda: in_tables(whole, sizes), c.arrow_schema, tmp_path), c)
    assert isinstance(part.data, Path) and part.data.parent == tmp_path
    assert (part.hash, part.rows) == (reference, n)
    assert part.data.read_bytes() == stored


def test_an_empty_partition_hashes_the_empty_string_and_stores_the_empty_table(tmp_path: Path) -> None:
    c = contract("string")
    part = spooled_part("all", KeyOrderedRows(lambda: iter([c.arrow_schema.empty_table()]), c.arrow_schema, tmp_path), c)
    assert (part.hash, part.rows) == (hash_partition(c.arrow_schema.empty_table(), c).hash, 0)
    assert part.data.read_bytes() == parquet_bytes(c.arrow_schema.empty_table())  # type: ignore[union-attr]


def test_a_duplicate_key_across_two_tables_is_refused_naming_the_key() -> None:
    c = contract("string")
    whole = sorted_for_storage(rows(100, "string"), c)
    again = whole.slice(49, 1)
    with pytest.raises(ContractViolationError, match="duplicate natural key") as raised:
        hash_key_ordered(iter([whole.slice(0, 50), again, whole.slice(50)]), c)
    assert repr(whole.column("id")[49].as_py()) in str(raised.value)


def test_tables_out_of_order_are_refused_and_a_publication_error_names_the_partition(tmp_path: Path) -> None:
    c = contract("composite")
    whole = sorted_for_storage(rows(100, "composite"), c)
    with pytest.raises(KeyOrderError):
        hash_key_ordered(iter([whole.slice(50), whole.slice(0, 50)]), c)
    swapped = KeyOrderedRows(lambda: iter([whole.slice(50), whole.slice(0, 50)]), c.arrow_schema, tmp_path)
    with pytest.raises(PublicationError, match="partition day=2026-06-01: the build engine gave rows out of key order"):
        spooled_part("day=2026-06-01", swapped, c)
    assert list(tmp_path.iterdir()) == []  # the spool file is removed


def test_a_table_out_of_order_in_itself_is_sorted_first() -> None:
    c = contract("int")
    whole = sorted_for_storage(rows(1000, "int"), c)
    shuffled = whole.slice(0, 500).take(pa.array(np.random.default_rng(3).permutation(500)))
    assert hash_key_ordered(iter([shuffled, whole.slice(500)]), c).hash == hash_partition(whole, c).hash


def test_the_row_filter_applies_table_by_table(tmp_path: Path) -> None:
    c = contract("string")
    whole = sorted_for_storage(rows(5_000, "string"), c)

    def keep(t: pa.Table) -> pa.Table:
        return t.filter(pa.compute.not_equal(pa.compute.utf8_slice_codeunits(t.column("meter"), 0, 2), "m1"))

    part = spooled_part("all", KeyOrderedRows(lambda: in_tables(whole, [333]), c.arrow_schema, tmp_path), c, keep)
    assert (part.hash, part.rows) == (hash_partition(keep(whole), c).hash, keep(whole).num_rows)
    assert part.data.read_bytes() == parquet_bytes(keep(whole))  # type: ignore[union-attr]


@pytest.mark.parametrize("key", ["string", "composite"])
def test_engine_parts_are_key_ordered_readers_with_the_in_memory_bytes(tmp_path: Path, key: str) -> None:
    """The build engine's parts: sorted by the engine (a 64 MiB pool, so it spills), the same leaves and bytes as in memory."""
    c = contract(key)
    table = rows(200_000, key)
    days = pa.array(np.datetime64("2026-06-01", "D") + (np.arange(200_000) % 3).astype("timedelta64[D]"), pa.date32())
    table = table.set_column(3, "day", days)
    with engine(EngineLimits(memory=64 << 20, threads=2, spill_root=tmp_path)) as con:
        load_table(con, "examples", table)
        parts = EngineExamples(con, "examples", c).parts()
        assert [k for k, _ in parts] == ["day=2026-06-01", "day=2026-06-02", "day=2026-06-03"]
        for i, (k, reader) in enumerate(parts):
            assert isinstance(reader, KeyOrderedRows)
            expected = sorted_for_storage(table.filter(pa.compute.equal(table.column("day"), days[i])), c)
            part = spooled_part(k, reader, c)
            assert (part.hash, part.rows) == (hash_partition(expected, c).hash, expected.num_rows)
            assert part.data.read_bytes() == parquet_bytes(expected)  # type: ignore[union-attr]
            assert reader().equals(expected)  # called: the whole partition, for small uses
            part.discard()
