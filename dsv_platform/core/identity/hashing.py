"""Partition hashes and the content hash (docs/canonical-encoding.md, "Hashes").

A partition is sorted by its natural key, checked for null and duplicate keys, encoded
chunk by chunk into canonical row text and fed to one SHA-256, with encoding overlapped
with hashing and memory bounded by one partition plus a few encoded chunks.

Details: docs/hashing.md
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity import row_gather
from dsv_platform.core.identity.canonical import (
    _as_array,
    _string_buffers,
    encode_column,
    encode_rows,
    line_bytes,
    row_key_at,
)
from dsv_platform.core.identity.canonical_native import NativeRows, Take, native_rows
from dsv_platform.core.identity.canonical_native import native_enabled as native_enabled  # re-exported: the compiled encoder's switch
from dsv_platform.core.identity.canonical_native import set_native as set_native
from dsv_platform.core.identity.packed_sort import stable_sort

UNPARTITIONED_KEY = "all"
CHUNK_ROWS = 1 << 18
ENCODE_THREADS = 2
HASH_QUEUE = 3  # encoded chunks waiting for the SHA-256 thread (a few rotating buffers)

Progress = Callable[[int], None]


@dataclass(frozen=True)
class PartitionDigest:
    """One leaf of the two-level hash: a partition's key, hash and row count."""

    key: str
    hash: str
    rows: int

    def to_document(self) -> dict[str, object]:
        return {"key": self.key, "hash": self.hash, "rows": self.rows}


@dataclass(frozen=True)
class DatasetDigest:
    """A dataset's logical identity: content hash (root), schema hash and the leaves."""

    content_hash: str
    schema_hash: str
    rows: int
    partitions: tuple[PartitionDigest, ...]

    def to_document(self) -> dict[str, object]:
        return {
            "content_hash": self.content_hash,
            "schema_hash": self.schema_hash,
            "rows": self.rows,
            "partitions": [p.to_document() for p in self.partitions],
        }


def content_hash(partitions: Iterable[tuple[str, str]]) -> str:
    """Root of the two-level hash: SHA-256 of ``key:hash`` lines sorted by key, LF-joined, no trailing LF."""
    pairs = sorted(partitions, key=lambda kv: kv[0])
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for i, k in enumerate(keys) if i and keys[i - 1] == k)
        raise ContractViolationError(f"two partitions share the key {dup!r}")
    text = "\n".join(f"{k}:{h}" for k, h in pairs)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_keys(sorted_keys: pa.Table, contract: Contract, source: str | None) -> None:
    n = sorted_keys.num_rows
    if n < 2:
        return
    same: pa.Array | None = None
    for name in contract.key:
        col = sorted_keys.column(name)
        eq = pc.equal(col.slice(1), col.slice(0, n - 1))
        same = eq if same is None else pc.and_(same, eq)
    assert same is not None
    if pc.any(same).as_py():
        i = int(np.flatnonzero(np.asarray(same.to_numpy(zero_copy_only=False)))[0]) + 1
        raise ContractViolationError("duplicate natural key", row_key=row_key_at(sorted_keys, contract.key, i), source=source)


def _key_integers(values: pa.ChunkedArray) -> np.ndarray | None:
    """The key as int64 in the same order as its typed values, or None if the type needs Arrow's sort."""
    t = values.type
    if not (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)):
        return None
    if pa.types.is_timestamp(t) or pa.types.is_date64(t):
        storage = pa.int64()
    elif pa.types.is_date32(t):
        storage = pa.int32()
    else:
        storage = t
    chunks = [np.asarray(c.view(storage).to_numpy(zero_copy_only=False)) for c in values.chunks]
    ints = np.concatenate(chunks) if len(chunks) > 1 else chunks[0] if chunks else np.empty(0, storage.to_pandas_dtype())
    if ints.dtype == np.uint64 and len(ints) and int(ints.max()) >= 2**63:
        return None
    return ints.astype(np.int64, copy=False)


def _integer_order(ints: np.ndarray) -> tuple[np.ndarray | None, int | None]:
    """Stable ascending order of ``ints`` (None when already strictly increasing) and the first duplicate's position in it.

    Duplicates are found on the sorted keys in one sequential pass, not by gathering the keys in the new order.
    """
    if len(ints) < 2 or bool(np.all(ints[1:] > ints[:-1])):
        return None, None
    ordered, order = stable_sort(ints)
    same = ordered[1:] == ordered[:-1]
    return order, (int(np.argmax(same)) + 1 if same.any() else None)


def _sort_order(table: pa.Table, contract: Contract, source: str | None) -> np.ndarray | None:
    """Row order by natural key (None: already in order); refuses missing, null and duplicate keys."""
    for name in contract.key:
        if name not in table.column_names:
            raise ContractViolationError(f"missing key column; the contract declares {contract.column_names}", column=name, source=source)
        if table.column(name).null_count:
            raise ContractViolationError("null in a natural key column", column=name, source=source)
    ints = _key_integers(table.column(contract.key[0])) if len(contract.key) == 1 else None
    if ints is None:
        keys = table.select(list(contract.key))
        indices = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in contract.key])
        _check_keys(keys.take(indices), contract, source)
        return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    order, duplicate = _integer_order(ints)
    if order is not None and duplicate is not None:
        raise ContractViolationError("duplicate natural key", row_key=row_key_at(table, contract.key, int(order[duplicate])), source=source)
    return order


def sort_by_key(table: pa.Table, contract: Contract, *, source: str | None = None) -> pa.Array:
    """Indices that sort ``table`` by the contract's natural key; refuses null and duplicate keys."""
    order = _sort_order(table, contract, source)
    return pa.array(np.arange(table.num_rows, dtype=np.int64) if order is None else order, pa.int64())


def _fixed_width(values: pa.Array) -> int | None:
    """The common byte length of every value of a string array without nulls, else None."""
    if values.null_count or not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)) or len(values) == 0:
        return None
    offsets, _ = _string_buffers(values)
    width = int(offsets[1])
    if width == 0 or width > 64 or int(offsets[-1]) != width * len(values) or not bool(np.all(np.diff(offsets) == width)):
        return None
    return width


class _Gatherer:
    """Takes rows of one column in a given order, choosing the cheapest way for its layout."""

    def __init__(self, values: pa.ChunkedArray | pa.Array) -> None:
        # A many-chunk column stays chunked (Arrow's chunked take): combining it would copy the partition.
        chunked = isinstance(values, pa.ChunkedArray) and values.num_chunks > 1
        self.values: pa.Array | pa.ChunkedArray = values if chunked else _as_array(values)
        self.width = None if chunked else _fixed_width(self.values)
        if self.width is not None:
            _, data = _string_buffers(self.values)
            self.records = data.view(np.dtype((np.void, self.width)))

    def take(self, order: np.ndarray | None, start: int, rows: int) -> pa.Array:
        if order is None:
            return self.values.slice(start, rows)
        indices = order[start : start + rows]
        if self.width is None:
            return self.values.take(pa.array(indices, pa.int64()))
        data = self.records[indices]
        offsets = np.arange(0, (len(indices) + 1) * self.width, self.width, dtype=np.int32)
        return pa.Array.from_buffers(pa.string(), len(indices), [None, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=0)


def iter_canonical_chunks(
    table: pa.Table, contract: Contract, *, source: str | None = None, chunk_rows: int = CHUNK_ROWS, progress: Progress | None = None
) -> Iterator[memoryview]:
    """The canonical bytes of ``table`` in key order, chunk by chunk (the next chunk encodes while you consume this one).

    Rows out of key order go through the whole-row gather (:mod:`dsv_platform.core.identity.row_gather`)
    when the compiled encoder plans the table; otherwise each chunk is encoded in key order.
    """
    table = table.select([c for c in contract.column_names if c in table.column_names])
    order = _sort_order(table, contract, source)
    n = table.num_rows
    gatherers: dict[str, _Gatherer] = {}

    def take(name: str, o: np.ndarray | None, start: int, rows: int) -> pa.Array:
        g = gatherers.get(name)
        if g is None:  # built on first use (two threads may both build one: same result)
            g = gatherers[name] = _Gatherer(table.column(name))
        return g.take(o, start, rows)

    def encode_pure(start: int, rows: int) -> memoryview:
        part = pa.table({name: take(name, order, start, rows) for name in table.column_names})
        return line_bytes(encode_rows(part, contract, source=source))

    plan = native_rows(table, contract, source=source)
    if plan is not None and order is not None and n >= row_gather.MIN_ROWS:
        chunks = row_gather.gathered_chunks(plan, order, table.nbytes, take, lambda lo, hi: _pure_range(encode_pure, lo, hi, chunk_rows))
    else:
        chunks = _key_order_chunks(plan, order, n, chunk_rows, take, encode_pure)
    for rows, chunk in chunks:
        yield chunk
        del chunk
        if progress is not None:
            progress(rows)
    if plan is not None:
        plan.release()


def _pure_range(encode_pure: Callable[[int, int], memoryview], lo: int, hi: int, chunk_rows: int) -> Iterator[tuple[int, memoryview]]:
    for start in range(lo, hi, chunk_rows):
        rows = min(chunk_rows, hi - start)
        yield rows, encode_pure(start, rows)


def _key_order_chunks(
    plan: NativeRows | None, order: np.ndarray | None, n: int, chunk_rows: int, take: Take, encode_pure: Callable[[int, int], memoryview]
) -> Iterator[tuple[int, memoryview]]:
    """``(rows, bytes)`` chunks encoded straight in key order, two at a time on worker threads."""

    def encode(start: int) -> memoryview:
        rows = min(chunk_rows, n - start)
        if plan is None:
            return encode_pure(start, rows)
        try:
            return memoryview(plan.encode(order, start, rows, take))
        except (ValueError, IndexError, ContractViolationError):
            return encode_pure(start, rows)  # the pure path reports the error (or, if the plan was wrong, gives the right bytes)

    starts = list(range(0, n, chunk_rows))
    with ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="dsv-encode") as pool:
        pending = deque(pool.submit(encode, start) for start in starts[:ENCODE_THREADS])
        for i in range(len(starts)):
            chunk = pending.popleft().result()
            if i + ENCODE_THREADS < len(starts):
                pending.append(pool.submit(encode, starts[i + ENCODE_THREADS]))
            yield min(chunk_rows, n - starts[i]), chunk
            del chunk


def hash_partition(
    table: pa.Table, contract: Contract, *, key: str = UNPARTITIONED_KEY, source: str | None = None, progress: Progress | None = None
) -> PartitionDigest:
    """The partition hash of ``table`` (any row order, any chunking)."""
    digest = hashlib.sha256()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsv-sha256") as hasher:  # SHA-256 on its own thread, in order
        pending: deque[Future[None]] = deque()
        for chunk in iter_canonical_chunks(table, contract, source=source, progress=progress):
            pending.append(hasher.submit(digest.update, chunk))
            if len(pending) > HASH_QUEUE:
                pending.popleft().result()
        for update in pending:
            update.result()
    return PartitionDigest(key=key, hash=digest.hexdigest(), rows=table.num_rows)


def canonical_bytes(table: pa.Table, contract: Contract, *, source: str | None = None) -> bytes:
    """All canonical row text of ``table`` as one bytes value (small inputs, tests, auditors)."""
    return b"".join(bytes(chunk) for chunk in iter_canonical_chunks(table, contract, source=source))


def partition_keys(table: pa.Table | pa.RecordBatch, contract: Contract, partition_by: str | None) -> pa.Array:
    """Hive-style partition key (``col=<canonical text>``) of every row, or ``all``."""
    if partition_by is None:
        return pa.repeat(UNPARTITIONED_KEY, table.num_rows)
    column = contract.column(partition_by)
    if partition_by not in table.column_names:
        raise ContractViolationError("missing partition column", column=partition_by)
    as_table = table if isinstance(table, pa.Table) else pa.Table.from_batches([table])
    texts = encode_column(as_table.column(partition_by), column, table=as_table, key=contract.key)
    return pc.binary_join_element_wise(f"{partition_by}=", texts, "")


def hash_table(table: pa.Table, contract: Contract, *, partition_by: str | None = None, progress: Progress | None = None) -> DatasetDigest:
    """Identity of an in-memory table: partition leaves and the content hash root."""
    digests = []
    if partition_by is None:  # one partition: no key array, no split
        digests.append(hash_partition(table, contract, progress=progress))
    else:
        keys = partition_keys(table, contract, partition_by)
        for key in sorted(pc.unique(keys).to_pylist()):
            part = table.filter(pc.equal(keys, key))
            digests.append(hash_partition(part, contract, key=key, progress=progress))
    return digest_of(digests, contract)


def digest_of(digests: Iterable[PartitionDigest], contract: Contract) -> DatasetDigest:
    """Combine partition leaves into a :class:`DatasetDigest`."""
    leaves = tuple(sorted(digests, key=lambda d: d.key))
    if not leaves:
        leaves = (PartitionDigest(UNPARTITIONED_KEY, hashlib.sha256(b"").hexdigest(), 0),)
    return DatasetDigest(
        content_hash=content_hash((d.key, d.hash) for d in leaves),
        schema_hash=contract.schema_hash,
        rows=sum(d.rows for d in leaves),
        partitions=leaves,
    )
