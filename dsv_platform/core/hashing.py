"""Partition hashes and the content hash (CANONICAL-ENCODING.md, "Hashes").

A partition is sorted by its natural key (typed comparison), checked for null
and duplicate keys, encoded chunk by chunk into canonical row text and fed to
one SHA-256. Encoding of the next chunk runs in a worker thread while the main
thread hashes the current one (Arrow compute and hashlib both release the
GIL). Memory stays bounded by one partition plus two encoded chunks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.canonical import encode_column, encode_rows, line_bytes, row_key_at
from dsv_platform.core.contract import Contract
from dsv_platform.core.errors import ContractViolationError

UNPARTITIONED_KEY = "all"
CHUNK_ROWS = 1 << 18

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


def sort_by_key(table: pa.Table, contract: Contract, *, source: str | None = None) -> pa.Array:
    """Indices that sort ``table`` by the contract's natural key; refuses null and duplicate keys."""
    for name in contract.key:
        if name not in table.column_names:
            raise ContractViolationError(f"missing key column; the contract declares {contract.column_names}", column=name, source=source)
        if table.column(name).null_count:
            raise ContractViolationError("null in a natural key column", column=name, source=source)
    keys = table.select(list(contract.key))
    indices = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in contract.key])
    _check_keys(keys.take(indices), contract, source)
    return indices


def iter_canonical_chunks(
    table: pa.Table, contract: Contract, *, source: str | None = None, chunk_rows: int = CHUNK_ROWS, progress: Progress | None = None
) -> Iterator[memoryview]:
    """The canonical bytes of ``table`` in key order, chunk by chunk (the next chunk encodes while you consume this one)."""
    table = table.select([c for c in contract.column_names if c in table.column_names])
    indices = sort_by_key(table, contract, source=source)
    n = table.num_rows
    starts = list(range(0, n, chunk_rows))

    def encode(start: int) -> pa.Array:
        part = table.take(indices.slice(start, chunk_rows))
        return encode_rows(part, contract, source=source)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsv-encode") as pool:
        pending = pool.submit(encode, starts[0]) if starts else None
        for i, start in enumerate(starts):
            assert pending is not None
            lines = pending.result()
            pending = pool.submit(encode, starts[i + 1]) if i + 1 < len(starts) else None
            yield line_bytes(lines)
            if progress is not None:
                progress(min(chunk_rows, n - start))


def hash_partition(
    table: pa.Table, contract: Contract, *, key: str = UNPARTITIONED_KEY, source: str | None = None, progress: Progress | None = None
) -> PartitionDigest:
    """The partition hash of ``table`` (any row order, any chunking)."""
    digest = hashlib.sha256()
    for chunk in iter_canonical_chunks(table, contract, source=source, progress=progress):
        digest.update(chunk)
    return PartitionDigest(key=key, hash=digest.hexdigest(), rows=table.num_rows)


def canonical_bytes(table: pa.Table, contract: Contract, *, source: str | None = None) -> bytes:
    """All canonical row text of ``table`` as one bytes value (small inputs, tests, auditors)."""
    return b"".join(bytes(chunk) for chunk in iter_canonical_chunks(table, contract, source=source))


def partition_keys(table: pa.Table | pa.RecordBatch, contract: Contract, partition_by: str | None) -> pa.Array:
    """Hive-style partition key (``col=<canonical text>``) of every row, or ``all``."""
    if partition_by is None:
        return pa.array([UNPARTITIONED_KEY] * table.num_rows, pa.string())
    column = contract.column(partition_by)
    if partition_by not in table.column_names:
        raise ContractViolationError("missing partition column", column=partition_by)
    as_table = table if isinstance(table, pa.Table) else pa.Table.from_batches([table])
    texts = encode_column(as_table.column(partition_by), column, table=as_table, key=contract.key)
    return pc.binary_join_element_wise(f"{partition_by}=", texts, "")


def hash_table(table: pa.Table, contract: Contract, *, partition_by: str | None = None, progress: Progress | None = None) -> DatasetDigest:
    """Identity of an in-memory table: partition leaves and the content hash root."""
    keys = partition_keys(table, contract, partition_by)
    digests = []
    if partition_by is None:
        digests.append(hash_partition(table, contract, progress=progress))
    else:
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
