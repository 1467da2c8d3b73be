"""Hash a dataset that arrives as a stream of record batches, partition by partition.

Rows of one partition may be spread over any number of files and batches.
Batches are grouped by partition key; small datasets stay in memory, larger
ones spill each partition to its own Arrow IPC file in a scratch folder, so
memory is bounded by one partition (the sort and the key checks need all of
a partition's rows at once) plus the spill threshold.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity.canonical import row_key_at
from dsv_platform.core.identity.hashing import (
    UNPARTITIONED_KEY,
    DatasetDigest,
    PartitionDigest,
    Progress,
    digest_of,
    hash_partition,
    iter_canonical_chunks,
    partition_keys,
    set_native,
    sort_by_key,
)

SPILL_BYTES = 256 << 20


def _first_invalid_utf8(values: pa.Array) -> int | None:
    """The index of the first value of a string array that is not valid UTF-8, else None (a fast full validation first)."""
    try:
        values.validate(full=True)
        return None
    except pa.ArrowInvalid:
        pass
    raw = values.view(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
    for index, value in enumerate(raw.to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                return index
    return None


def check_batch(batch: pa.RecordBatch, contract: Contract, source: str, first_row: int = 0) -> None:
    """Cheap per-batch checks that can still name the file: missing columns, types, nulls, invalid UTF-8 (with the row)."""
    for column in contract.columns:
        if column.name not in batch.schema.names:
            raise ContractViolationError(f"missing column; the contract declares {contract.column_names}", column=column.name, source=source)
        values = batch.column(column.name)
        if values.null_count and not column.nullable:
            raise ContractViolationError("null in a non-nullable column", column=column.name, source=source)
        if column.type.value == "timestamp" and pa.types.is_timestamp(values.type) and values.type.tz is None:
            raise ContractViolationError("naive timestamp (no time zone); canonical timestamps must be timezone-aware", column=column.name, source=source)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            bad = _first_invalid_utf8(values)
            if bad is not None:
                raise ContractViolationError(f"row {first_row + bad} (0-based): invalid UTF-8 in a string column", column=column.name, source=source)


class _PartitionBuffer:
    """Collects batches per partition key, spilling to IPC files past a memory threshold."""

    def __init__(self, schema: pa.Schema, scratch: Path, spill_bytes: int) -> None:
        self.schema = schema
        self.scratch = scratch
        self.spill_bytes = spill_bytes
        self.memory: dict[str, list[pa.RecordBatch]] = {}
        self.held = 0
        self.writers: dict[str, ipc.RecordBatchFileWriter] = {}
        self.paths: dict[str, Path] = {}

    def add(self, key: str, batch: pa.RecordBatch) -> None:
        self.memory.setdefault(key, []).append(batch)
        self.held += batch.nbytes
        if self.held > self.spill_bytes:
            self.flush()

    def flush(self) -> None:
        for key, batches in self.memory.items():
            if key not in self.writers:
                path = self.scratch / f"p{len(self.paths):06d}.arrow"
                self.paths[key] = path
                self.writers[key] = ipc.new_file(path, self.schema)
            for batch in batches:
                self.writers[key].write_batch(batch)
        self.memory = {}
        self.held = 0

    def partition_keys(self) -> list[str]:
        return sorted(set(self.memory) | set(self.writers))

    def table(self, key: str) -> pa.Table:
        batches = self.memory.get(key, [])
        if key in self.writers:
            self.writers.pop(key).close()
            spilled = ipc.open_file(pa.memory_map(str(self.paths[key]))).read_all()
            return pa.concat_tables([spilled, pa.Table.from_batches(batches, self.schema)]) if batches else spilled
        return pa.Table.from_batches(batches, self.schema)

    def files(self) -> list[tuple[str, Path]]:
        """Every partition spilled and its file closed: ``(key, path)`` in key order."""
        self.flush()
        for writer in self.writers.values():
            writer.close()
        self.writers = {}
        return sorted(self.paths.items())


def _split_by_key(batch: pa.RecordBatch, keys: pa.Array) -> Iterable[tuple[str, pa.RecordBatch]]:
    encoded = pc.dictionary_encode(keys)
    dictionary = encoded.dictionary.to_pylist()
    if len(dictionary) == 1:
        yield dictionary[0], batch
        return
    codes = encoded.indices.to_numpy()
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    grouped = batch.take(pa.array(order))
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(order)]])
    for start, end in zip(starts, ends, strict=True):
        yield dictionary[sorted_codes[start]], grouped.slice(int(start), int(end - start))


def _ingest(
    batches: Iterable[tuple[str, pa.RecordBatch]], contract: Contract, partition_by: str | None, tmp: Path, spill_bytes: int
) -> _PartitionBuffer | None:
    """Check every batch (naming its file) and group its rows by partition key; None for no input at all."""
    schema = None
    buffer: _PartitionBuffer | None = None
    rows_seen: dict[str, int] = {}
    for source, batch in batches:
        check_batch(batch, contract, source, rows_seen.get(source, 0))
        rows_seen[source] = rows_seen.get(source, 0) + batch.num_rows
        batch = batch.select(contract.column_names)
        if schema is None:
            schema = batch.schema
            buffer = _PartitionBuffer(schema, tmp, spill_bytes)
        elif batch.schema != schema:
            try:
                batch = batch.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
                raise ContractViolationError(f"schema differs from the first file's ({exc})", source=source) from exc
        assert buffer is not None
        if partition_by is None:  # one partition: no key array, no split (an empty input still has no partition)
            if batch.num_rows:
                buffer.add(UNPARTITIONED_KEY, batch)
            continue
        for key, part in _split_by_key(batch, partition_keys(batch, contract, partition_by)):
            buffer.add(key, part)
    return buffer


def iter_partitions(
    batches: Iterable[tuple[str, pa.RecordBatch]],
    contract: Contract,
    *,
    partition_by: str | None = None,
    scratch: Path | None = None,
    spill_bytes: int = SPILL_BYTES,
) -> Iterator[tuple[str, pa.Table]]:
    """``(partition key, rows)`` in key order, from ``(source name, batch)`` pairs in any order and layout."""
    with tempfile.TemporaryDirectory(prefix="dsv-spill-", dir=scratch) as tmp:
        buffer = _ingest(batches, contract, partition_by, Path(tmp), spill_bytes)
        if buffer is not None:
            for key in buffer.partition_keys():
                yield key, buffer.table(key)


@contextmanager
def spilled_partitions(
    batches: Iterable[tuple[str, pa.RecordBatch]],
    contract: Contract,
    *,
    partition_by: str | None = None,
    scratch: Path | None = None,
    spill_bytes: int = SPILL_BYTES,
) -> Iterator[list[tuple[str, Path]]]:
    """Every partition in its own Arrow IPC file, ``(key, path)`` in key order; the files are removed on exit.

    For hashing partitions in other processes: they get a path, never a table.
    """
    with tempfile.TemporaryDirectory(prefix="dsv-spill-", dir=scratch) as tmp:
        buffer = _ingest(batches, contract, partition_by, Path(tmp), spill_bytes)
        yield buffer.files() if buffer is not None else []


def hash_spilled(path: str, contract: Contract, key: str, native: bool = True) -> PartitionDigest:
    """The partition hash of one file written by :func:`spilled_partitions` (run in a worker process)."""
    set_native(native)
    table = ipc.open_file(pa.memory_map(path)).read_all()
    return hash_partition(table, contract, key=key)


def hash_batches(
    batches: Iterable[tuple[str, pa.RecordBatch]],
    contract: Contract,
    *,
    partition_by: str | None = None,
    scratch: Path | None = None,
    spill_bytes: int = SPILL_BYTES,
    progress: Progress | None = None,
) -> DatasetDigest:
    """Identity of a dataset given as ``(source name, batch)`` pairs, in any order and layout."""
    parts = iter_partitions(batches, contract, partition_by=partition_by, scratch=scratch, spill_bytes=spill_bytes)
    return digest_of((hash_partition(table, contract, key=key, progress=progress) for key, table in parts), contract)


class KeyOrderError(ValueError):
    """Tables said to come in natural-key order did not (an engine's ORDER BY disagreed with the canonical order)."""


def _after(previous: pa.Table, first: pa.Table, contract: Contract, source: str | None) -> None:
    """``first`` (one key row) must sort strictly after ``previous`` (one key row): equal is a duplicate key, less is disorder."""
    for name in contract.key:
        before, after = previous.column(name)[0], first.column(name)[0]
        if pc.less(before, after).as_py():
            return
        if not pc.equal(before, after).as_py():
            raise KeyOrderError(f"{source or 'rows'}: key {row_key_at(first, contract.key, 0)!r} came after {row_key_at(previous, contract.key, 0)!r}")
    raise ContractViolationError("duplicate natural key", row_key=row_key_at(first, contract.key, 0), source=source)


def hash_key_ordered(
    tables: Iterable[pa.Table],
    contract: Contract,
    *,
    key: str = UNPARTITIONED_KEY,
    source: str | None = None,
    sink: Callable[[pa.Table], object] | None = None,
) -> PartitionDigest:
    """The partition hash of rows that arrive in natural-key order over any number of tables (an engine's ``ORDER BY``).

    Memory is one table, whatever the partition's size: each table is encoded and hashed as it comes, its keys checked
    (nulls, duplicates) and its first key checked to sort strictly after the last key of the table before, so the bytes
    are those :func:`hash_partition` gives the whole partition. A table out of order in itself is sorted; one that starts
    before the previous one ended raises :class:`KeyOrderError`. ``sink`` gets each table in key order (a Parquet writer).
    """
    digest, rows, last = hashlib.sha256(), 0, None
    names = list(contract.key)
    for table in tables:
        if not table.num_rows:
            continue
        order = sort_by_key(table, contract, source=source)
        if table.num_rows > 1 and not pc.all(pc.equal(order, pa.array(np.arange(table.num_rows, dtype=np.int64)))).as_py():
            table = table.take(order)
        if last is not None:
            _after(last, table.select(names).slice(0, 1), contract, source)
        for chunk in iter_canonical_chunks(table, contract, source=source):
            digest.update(chunk)
        if sink is not None:
            sink(table)
        rows += table.num_rows
        last = table.select(names).slice(table.num_rows - 1, 1)
    return PartitionDigest(key=key, hash=digest.hexdigest(), rows=rows)
