"""Key-ordered canonical text by whole-row gather (docs/hashing.md, "Whole-row gather").

Encoding rows in key order reads every column at random: about ten cache
misses a row. Here the sorted rows are cut into key-range buckets of about
:data:`BUCKET_BYTES` of Arrow data. A bucket's rows are encoded in storage
order (ascending row index: each column is read forward), recording where
each row ends, and whole row texts are then copied in key order into
cache-sized blocks: one to three random cache lines a row. The next bucket
encodes on a worker thread while this one is gathered and hashed, so memory
holds the table, the order and two bucket texts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from dsv_platform import _native
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity.canonical_native import NativeRows, Take
from dsv_platform.core.identity.packed_sort import stable_sort

BUCKET_BYTES = 64 << 20
GATHER_ROWS = 1 << 13  # rows a gathered block: about 650 KB of text, inside L2 + a slice of L3
MIN_ROWS = 1 << 15  # below this a key-order encode is as fast (the table is in cache)
SEGMENTS = 2  # a bucket is encoded in this many pieces at once

# ``fallback(lo, hi)``: the canonical bytes of key-ordered rows lo..hi by the pure path (which reports errors).
Fallback = Callable[[int, int], Iterator[tuple[int, memoryview]]]


def bucket_bounds(rows: int, table_bytes: int, bucket_bytes: int = BUCKET_BYTES) -> list[tuple[int, int]]:
    """Key-order row ranges of about ``bucket_bytes`` of Arrow data each (at least one row each)."""
    buckets = max(1, -(-table_bytes // max(1, bucket_bytes)))
    size = max(1, -(-rows // buckets))
    return [(lo, min(rows, lo + size)) for lo in range(0, rows, size)]


def storage_positions(keyed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, where)``: ``keyed``'s row indices ascending, and for each key position where its row is in ``rows``."""
    rows, order = stable_sort(keyed)
    where = np.empty(len(keyed), dtype=np.int64)
    where[order] = np.arange(len(keyed), dtype=np.int64)
    return rows, where


class _Bucket:
    """One key range: its rows ascending, where each key position's row is, and the segments encoding on the pool."""

    def __init__(self, pool: ThreadPoolExecutor, plan: NativeRows, keyed: np.ndarray, take: Take) -> None:
        self.rows, self.where = storage_positions(keyed)
        self.ends = np.empty(len(self.rows), dtype=np.int64)
        self.seg_rows = max(1, -(-len(self.rows) // SEGMENTS))
        self.segments = [
            pool.submit(_encode_segment, plan, self.rows[lo : lo + self.seg_rows], self.ends[lo : lo + self.seg_rows], take)
            for lo in range(0, len(self.rows), self.seg_rows)
        ]

    def texts(self) -> list[memoryview] | None:
        """The segments' texts, or None when one needs the pure path."""
        texts = [f.result() for f in self.segments]
        return None if any(t is None for t in texts) else [t for t in texts if t is not None]


def _encode_segment(plan: NativeRows, rows: np.ndarray, ends: np.ndarray, take: Take) -> memoryview | None:
    try:
        return plan.encode(rows, 0, len(rows), take, ends=ends)
    except (ValueError, IndexError, ContractViolationError):
        return None


def gathered_chunks(plan: NativeRows, order: np.ndarray, table_bytes: int, take: Take, fallback: Fallback) -> Iterator[tuple[int, memoryview]]:
    """``(rows, bytes)`` of ``plan``'s rows in ``order``, block by block (see the module docstring).

    The next bucket is planned and queued before this one is awaited, so the
    encoder threads never wait for the main thread; at most two bucket texts
    are alive (the one gathered and the one encoding).
    """
    bounds = bucket_bounds(len(order), table_bytes)
    with ThreadPoolExecutor(max_workers=SEGMENTS, thread_name_prefix="dsv-encode") as pool:
        queued = deque([_Bucket(pool, plan, order[bounds[0][0] : bounds[0][1]], take)])
        for i, (lo, hi) in enumerate(bounds):
            if i + 1 < len(bounds):
                queued.append(_Bucket(pool, plan, order[bounds[i + 1][0] : bounds[i + 1][1]], take))
            bucket = queued.popleft()
            texts = bucket.texts()
            if texts is None:
                yield from fallback(lo, hi)
            else:
                for start in range(0, hi - lo, GATHER_ROWS):
                    rows = min(GATHER_ROWS, hi - lo - start)
                    yield rows, memoryview(_native.gather(texts, bucket.seg_rows, bucket.ends, bucket.where, start, rows))
            del texts, bucket  # this bucket's text is freed before the next one is planned
