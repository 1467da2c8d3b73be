"""(a) Canonical hashing time / SHA-256 time alone over the same canonical bytes (target <= 3x).

The ratio is for the default path (the compiled row encoder when it is built);
the pure numpy/Arrow path is timed in the same run for comparison.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import Result, timed
from benchmarks.data import dataset, transactions_contract
from dsv_platform import _native
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.identity import canonical_native, hashing, row_gather
from dsv_platform.core.identity.canonical import encode_rows

TARGET = 3.0


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _sha256(chunks: list[bytes]) -> hashlib._Hash:
    """SHA-256 alone over ``chunks``, fed one at a time as the hasher is."""
    sha = hashlib.sha256()
    for chunk in chunks:
        sha.update(chunk)
    return sha


def _native_many_chunks_s(table: pa.Table, contract: Contract, order: np.ndarray | None) -> float | None:
    """The compiled encoder over the same rows cut into 80 chunks, as a spilled partition is read back (no per-row chunk search)."""
    many = pa.Table.from_batches(table.to_batches(max_chunksize=max(1, -(-table.num_rows // 80))))
    plan = canonical_native.native_rows(many, contract)
    if plan is None:
        return None
    seconds = 0.0
    for start in range(0, table.num_rows, hashing.CHUNK_ROWS):
        t0 = time.perf_counter()
        plan.encode(order, start, min(hashing.CHUNK_ROWS, table.num_rows - start))
        seconds += time.perf_counter() - t0
    plan.release()
    return round(seconds, 3)


def _breakdown(table: pa.Table, contract: Contract) -> dict[str, float]:
    """Stage seconds, one thread, stage by stage (the pipelined run overlaps them)."""
    sort_s, order = timed(lambda: hashing._sort_order(table, contract, None))
    gatherers = {name: hashing._Gatherer(table.column(name)) for name in table.column_names}
    take_s = encode_s = 0.0
    for start in range(0, table.num_rows, hashing.CHUNK_ROWS):
        t0 = time.perf_counter()
        part = pa.table({n: g.take(order, start, hashing.CHUNK_ROWS) for n, g in gatherers.items()})
        t1 = time.perf_counter()
        encode_rows(part, contract)
        t2 = time.perf_counter()
        take_s += t1 - t0
        encode_s += t2 - t1
    breakdown: dict[str, float] = {"sort": round(sort_s, 3), "pure_gather": round(take_s, 3), "pure_encode": round(encode_s, 3)}
    plan = canonical_native.native_rows(table, contract)
    if plan is not None:
        native_s = 0.0
        for start in range(0, table.num_rows, hashing.CHUNK_ROWS):
            t0 = time.perf_counter()
            plan.encode(order, start, min(hashing.CHUNK_ROWS, table.num_rows - start))
            native_s += time.perf_counter() - t0
        plan.release()
        breakdown["native_gather_encode_join"] = round(native_s, 3)
        many_s = _native_many_chunks_s(table, contract, order)
        if many_s is not None:
            breakdown["native_gather_encode_join_80_chunks"] = many_s
        breakdown.update(_gather_breakdown(table, contract, order, plan))
    return breakdown


def _gather_breakdown(table: pa.Table, contract: Contract, order: np.ndarray | None, plan: canonical_native.NativeRows) -> dict[str, float]:
    """The whole-row gather's stages, one after another on one thread (the default path overlaps them on two cores)."""
    if order is None:
        return {}
    take = lambda name, o, s, r: hashing._Gatherer(table.column(name)).take(o, s, r)  # noqa: E731
    stages = {"gather_positions": 0.0, "gather_storage_order_encode": 0.0, "gather_rows": 0.0, "gather_sha256": 0.0}
    sha = hashlib.sha256()
    for lo, hi in row_gather.bucket_bounds(len(order), table.nbytes):
        t0 = time.perf_counter()
        rows, where = row_gather.storage_positions(order[lo:hi])
        ends = np.empty(len(rows), dtype=np.int64)
        t1 = time.perf_counter()
        text = plan.encode(rows, 0, len(rows), take, ends=ends)
        t2 = time.perf_counter()
        stages["gather_positions"] += t1 - t0
        stages["gather_storage_order_encode"] += t2 - t1
        for start in range(0, hi - lo, row_gather.GATHER_ROWS):
            t3 = time.perf_counter()
            block = _native.gather([text], len(rows), ends, where, start, min(row_gather.GATHER_ROWS, hi - lo - start))
            t4 = time.perf_counter()
            sha.update(block)
            stages["gather_rows"] += t4 - t3
            stages["gather_sha256"] += time.perf_counter() - t4
    plan.release()
    return {k: round(v, 3) for k, v in stages.items()}


def _key_order_hash_s(table: pa.Table, contract: Contract) -> float:
    """``hash_table`` with the whole-row gather switched off: every chunk encoded straight in key order (the path before it)."""
    previous = row_gather.MIN_ROWS
    row_gather.MIN_ROWS = 1 << 62
    try:
        seconds, _ = timed(lambda: hashing.hash_table(table, contract))
    finally:
        row_gather.MIN_ROWS = previous
    return round(seconds, 3)


def run(rows: int) -> Result:
    folder, _ = dataset(rows)
    contract = transactions_contract()
    native = canonical_native.native_enabled()
    read_s, table = timed(lambda: pq.read_table(folder, columns=contract.column_names).combine_chunks())
    load_before = _load()
    hash_s, digest = timed(lambda: hashing.hash_table(table, contract))
    chunks = [bytes(c) for c in hashing.iter_canonical_chunks(table, contract)]
    # Bound to the call, not closed over: the lambda would otherwise refer to ``chunks`` after the ``del`` below.
    sha_s, sha = timed(functools.partial(_sha256, chunks))
    assert sha.hexdigest() == digest.partitions[0].hash
    size = sum(len(c) for c in chunks)
    del chunks  # free the canonical bytes (the size of the table again) before the pure-path run
    pure_hash_s = None
    if native:
        previous = canonical_native.set_native(False)
        try:
            pure_hash_s, pure_digest = timed(lambda: hashing.hash_table(table, contract))
        finally:
            canonical_native.set_native(previous)
        assert pure_digest == digest, "native and pure paths disagree"
    breakdown = _breakdown(table, contract)
    breakdown["hash"] = round(sha_s, 3)
    ratio = hash_s / sha_s
    details: dict[str, object] = {
        "rows": rows,
        "path": "native" if native else "pure",
        "canonical_bytes": size,
        "hash_table_s": round(hash_s, 3),
        "sha256_only_s": round(sha_s, 3),
    }
    if native:
        details["key_order_hash_table_s"] = _key_order_hash_s(table, contract)
        details["key_order_ratio"] = round(details["key_order_hash_table_s"] / sha_s, 1)  # type: ignore[operator]
    if pure_hash_s is not None:
        details["pure_hash_table_s"] = round(pure_hash_s, 3)
        details["pure_ratio"] = round(pure_hash_s / sha_s, 1)
    details.update(
        {
            "read_parquet_s": round(read_s, 3),
            "end_to_end_ratio_incl_read": round((read_s + hash_s) / sha_s, 1),
            "breakdown_single_thread_s": breakdown,
            "load_average_before_after": f"{load_before} / {_load()}",
        }
    )
    return Result("a) canonical hash / SHA-256 alone", ratio, f"<= {TARGET:g}x", ratio <= TARGET, details)
