"""Hash the partitions of a streamed dataset in worker processes, one partition per worker at a time.

The input is checked and split by partition key in this process (spilled to one Arrow IPC
file per partition); workers get file paths, never tables, so memory stays bounded by
workers x one partition. Results are combined in key order, so the digest (and the first
error, in key order) is exactly the serial path's for every number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.identity.hashing import DatasetDigest, PartitionDigest, Progress, digest_of, native_enabled
from dsv_platform.core.identity.streaming import hash_batches, hash_spilled, spilled_partitions


def default_jobs() -> int:
    """Half the cores: the serial path already encodes on two threads, so one worker per two cores (1 on a 2-core machine)."""
    return max(1, (os.cpu_count() or 1) // 2)


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where the platform has it, else spawn; never fork (pyarrow's thread pools do not survive it).

    The fork server imports the hashing code once (no thread pool is started by an import), so a worker starts as a fork of it.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([hash_spilled.__module__])
    return context


def _collect(futures: list[Future[PartitionDigest]], progress: Progress | None) -> list[PartitionDigest]:
    """Results in key order: the first failing partition (in key order) raises, as on the serial path."""
    digests = []
    for future in futures:
        digest = future.result()
        if progress is not None:
            progress(digest.rows)
        digests.append(digest)
    return digests


def hash_parallel(
    batches: Iterable[tuple[str, pa.RecordBatch]],
    contract: Contract,
    *,
    partition_by: str | None = None,
    jobs: int | None = None,
    scratch: Path | None = None,
    progress: Progress | None = None,
) -> DatasetDigest:
    """:func:`hash_batches` with up to ``jobs`` partitions hashed at once (1, or an unpartitioned contract: in this process)."""
    jobs = default_jobs() if jobs is None else jobs
    if jobs <= 1 or partition_by is None:
        return hash_batches(batches, contract, partition_by=partition_by, scratch=scratch, progress=progress)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_context())
    try:
        for _ in range(jobs):  # the workers start while this process reads and splits the input
            pool.submit(native_enabled)
        with spilled_partitions(batches, contract, partition_by=partition_by, scratch=scratch) as parts:
            futures = [pool.submit(hash_spilled, str(path), contract, key, native_enabled()) for key, path in parts]
            digests = _collect(futures, progress)
    finally:  # on an error: drop the queued partitions, wait for the running ones, leave no worker behind
        pool.shutdown(wait=True, cancel_futures=True)
    return digest_of(digests, contract)
