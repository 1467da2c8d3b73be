"""Prepare the parts of a build on worker threads, at most ``jobs`` partitions in flight, results in input order.

A build's per-partition CPU work (row filter, sort, hash, Parquet bytes) runs in pyarrow and
the compiled encoder, which release the GIL, so threads use several cores. Results come back
in partition order and the caller does every store call itself, so the manifest, the store
calls, the ``on_step`` events and the first error (the earliest failing partition's) are
exactly the serial build's. After an error no further partition is started.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_build_jobs() -> int:
    """One worker thread per core."""
    return max(1, os.cpu_count() or 1)


def _in_order(pool: ThreadPoolExecutor, fn: Callable[[T], R], items: Iterable[T], jobs: int) -> Generator[R, None, None]:
    """``fn`` of each item, in input order; the result being consumed counts as in flight, so at most ``jobs`` are."""
    source = iter(items)
    window: deque[Future[R]] = deque(pool.submit(fn, item) for _, item in zip(range(jobs), source, strict=False))
    while window:
        yield window.popleft().result()  # in input order: the earliest item's error is raised first, whatever failed first
        for item in source:  # the next item starts only once the caller is done with this result
            window.append(pool.submit(fn, item))
            break


@contextmanager
def ordered_map(fn: Callable[[T], R], items: Iterable[T], jobs: int) -> Iterator[Iterator[R]]:
    """``fn`` over ``items`` on ``jobs`` threads, yielded in input order; ``items`` is read at most ``jobs`` ahead.

    On leaving the block (an error, or the caller stopping early) nothing new starts and the running items are waited for.
    """
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="dsv-part")
    results = _in_order(pool, fn, items, jobs)
    try:
        yield results
    finally:
        results.close()
        pool.shutdown(wait=True, cancel_futures=True)
