"""A realization's parts as stored: deterministic Parquet bytes of a partition in natural-key order, with its partition hash.

A partition comes whole (a table, sorted here) or as tables already in key order (:class:`KeyOrderedRows`, the build
engine's ``ORDER BY``), which are hashed and written table by table into a spool file: the same bytes, in memory bounded
by one table and one row group whatever the partition's size (docs/scale.md).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import PublicationError
from dsv_platform.core.identity.hashing import sort_by_key
from dsv_platform.core.identity.streaming import KeyOrderError, hash_key_ordered

PARQUET_OPTIONS: Mapping[str, Any] = {"compression": "zstd", "compression_level": 3, "row_group_size": 1 << 17, "write_statistics": True}


@dataclass(frozen=True)
class KeyOrderedRows:
    """A partition's rows as tables in natural-key order (the build engine's ``ORDER BY``), read when the part is prepared.

    The publisher hashes and writes them table by table into a spool file under ``spool``, so preparing a part holds one
    table and one Parquet row group, whatever the partition's size. Called, it gives the whole partition (small uses).
    """

    tables: Callable[[], Iterator[pa.Table]]
    schema: pa.Schema
    spool: Path | None = None

    def __call__(self) -> pa.Table:
        return pa.Table.from_batches([b for t in self.tables() for b in t.to_batches()], schema=self.schema)


@dataclass(frozen=True)
class PreparedPart:
    """A part ready to store: its partition hash and row count, and its Parquet bytes."""

    key: str
    hash: str
    rows: int
    data: bytes | Path  # the Parquet bytes, or a spool file holding them (removed once stored)

    @property
    def size(self) -> int:
        return self.data.stat().st_size if isinstance(self.data, Path) else len(self.data)

    def discard(self) -> None:
        if isinstance(self.data, Path):
            self.data.unlink(missing_ok=True)


def parquet_bytes(table: pa.Table) -> bytes:
    """Deterministic Parquet bytes of ``table`` (same rows, same writer version, same bytes)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **PARQUET_OPTIONS)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def spooled_part(key: str, rows: KeyOrderedRows, contract: Contract, row_filter: Callable[[pa.Table], pa.Table] | None = None) -> PreparedPart:
    """A key-ordered partition hashed and written as it streams: the file's bytes are :func:`parquet_bytes` of the whole.

    Tables are cut into row groups of ``PARQUET_OPTIONS['row_group_size']`` rows, each written as one contiguous table, as
    ``pq.write_table`` cuts a whole table; so the object (and its digest) is the one the in-memory path stores.
    """
    group = int(PARQUET_OPTIONS["row_group_size"])
    options = {k: v for k, v in PARQUET_OPTIONS.items() if k != "row_group_size"}
    fd, name = tempfile.mkstemp(prefix="part-", suffix=".parquet", dir=rows.spool)
    os.close(fd)
    path, held, pending = Path(name), list[pa.Table](), [0]  # pending: the rows held (not summed again per table)
    writer = pq.ParquetWriter(str(path), contract.arrow_schema, **options)

    def flush(final: bool) -> None:
        while held and (final or pending[0] >= group):
            whole = pa.concat_tables(held).combine_chunks()
            n = min(group, whole.num_rows)
            writer.write_table(whole.slice(0, n), row_group_size=group)
            held[:] = [whole.slice(n)] if whole.num_rows > n else []
            pending[0] = whole.num_rows - n

    def typed() -> Iterator[pa.Table]:
        for table in rows.tables():
            table = table if row_filter is None else row_filter(table)
            yield _cast(table.select(contract.column_names), contract)

    def sink(table: pa.Table) -> None:
        held.append(table)
        pending[0] += table.num_rows
        flush(False)

    try:
        try:
            leaf = hash_key_ordered(typed(), contract, key=key, sink=sink)
        except KeyOrderError as exc:
            raise PublicationError(f"{contract.name}: partition {key}: the build engine gave rows out of key order ({exc})") from exc
        flush(True)
        if leaf.rows == 0:
            writer.write_table(contract.arrow_schema.empty_table())
        writer.close()
    except BaseException:
        writer.close()
        path.unlink(missing_ok=True)
        raise
    return PreparedPart(key, leaf.hash, leaf.rows, path)


def _cast(table: pa.Table, contract: Contract) -> pa.Table:
    try:
        return table.cast(contract.arrow_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise PublicationError(f"{contract.name}: rows do not fit the contract's Arrow schema ({exc})") from exc


def sorted_for_storage(table: pa.Table, contract: Contract) -> pa.Table:
    """The contract's columns, typed by the contract, in natural-key order."""
    table = table.select(contract.column_names)
    return _cast(table.take(sort_by_key(table, contract)), contract)
