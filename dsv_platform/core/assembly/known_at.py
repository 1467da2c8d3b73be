"""The bitemporal as-of join (``as_known_at: example_time``) over a source's versions, in numpy.

A version of a key is *known* from its ``_recorded_at`` until the key's next version is recorded
(ordered by ``_recorded_at``, then ``_batch``, as the watermark read orders them). For a base row
with cutoff ``c`` (its ``time`` - ``lag``) a version is a candidate when it is known at ``c``, its
entity matches and its valid time is at or before ``c``; the pick is the candidate with the latest
valid time, ties to the largest contract key. So the source is read as it was known at ``c``, with
the rules of the ordinary join; with every ``c`` past the last recording the two joins agree.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

RECORDED_AT, BATCH = "_recorded_at", "_batch"
NEVER = np.iinfo(np.int64).max  # a version never superseded
PAIRS_PER_CHUNK = 1 << 22  # (base row, candidate) pairs compared at a time

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


def superseded_at(versions: pa.Table, key: tuple[str, ...] | list[str], recorded: Ints) -> Ints:
    """Per version, the instant (``recorded``'s unit) its key's next version was recorded; :data:`NEVER` for the last one."""
    n = versions.num_rows
    ends = np.full(n, NEVER, dtype=np.int64)
    if n < 2:
        return ends
    sort_keys = [(k, "ascending") for k in key] + [(RECORDED_AT, "ascending"), (BATCH, "ascending")]
    order = np.asarray(pc.sort_indices(versions.select([*dict.fromkeys([*key, RECORDED_AT, BATCH])]), sort_keys=sort_keys).to_numpy(), dtype=np.int64)
    same = np.ones(n - 1, dtype=bool)
    for k in key:
        col = versions.column(k).take(pa.array(order)).combine_chunks()
        a, b = col.slice(1), col.slice(0, n - 1)
        equal = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same &= np.asarray(pc.or_(equal, both_null).to_numpy(zero_copy_only=False), dtype=bool)
    ends[order[:-1][same]] = recorded[order[1:][same]]
    return ends


def known_at_pick(lcode: Ints, cutoff: Ints, left_ok: Bools, rcode: Ints, start: Ints, ends: Ints, valid: Ints, ranks: Ints) -> Ints:
    """Per base row, the index of the version picked (-1: none); ``start`` is when a version can first be picked.

    ``start`` = max(recorded, valid): a candidate at ``c`` satisfies ``start <= c < ends``. A key's
    last version is never superseded: of those, a running maximum by start answers each row; the
    superseded versions (corrections) are compared pair by pair. The larger (valid time, key rank) wins.
    """
    priority = np.empty(rcode.size, dtype=np.int64)
    priority[np.lexsort((ranks, valid))] = np.arange(rcode.size, dtype=np.int64)
    usable = (rcode >= 0) & (start < ends)
    asked = left_ok & (lcode >= 0)
    last = _latest_pick(lcode, cutoff, asked, rcode, start, priority, np.flatnonzero(usable & (ends == NEVER)))
    moved = _moved_pick(lcode, cutoff, asked, rcode, start, ends, priority, np.flatnonzero(usable & (ends != NEVER)))
    rank_of = np.full(priority.size + 1, -1, dtype=np.int64)
    rank_of[:-1] = priority  # index -1 (no pick) has priority -1
    return np.where(rank_of[last] >= rank_of[moved], last, moved)


def _latest_pick(lcode: Ints, cutoff: Ints, asked: Bools, rcode: Ints, start: Ints, priority: Ints, items: Ints) -> Ints:
    """Per base row, the never-superseded version of its entity with start <= cutoff and the largest priority (-1: none)."""
    hit = np.full(lcode.size, -1, dtype=np.int64)
    if items.size == 0:
        return hit
    _, times = np.unique(np.concatenate([start[items], cutoff]), return_inverse=True)
    width = int(times.max(initial=0)) + 2
    key = rcode[items] * width + times[: items.size]
    order = np.argsort(key, kind="stable")
    items, key = items[order], key[order]
    top = int(priority.size) + 1
    running = np.maximum.accumulate(rcode[items] * top + priority[items])  # per entity: later entities' values are all larger
    pos = np.searchsorted(key, lcode * width + times[items.size :], side="right") - 1
    at = np.clip(pos, 0, None)
    found = asked & (pos >= 0) & (rcode[items[at]] == lcode)
    by_priority = np.empty(priority.size, dtype=np.int64)
    by_priority[priority] = np.arange(priority.size, dtype=np.int64)
    hit[found] = by_priority[running[at[found]] - lcode[found] * top]
    return hit


def _moved_pick(lcode: Ints, cutoff: Ints, asked: Bools, rcode: Ints, start: Ints, ends: Ints, priority: Ints, items: Ints) -> Ints:
    """Per base row, the superseded version of its entity known at the cutoff with the largest priority (-1: none), pair by pair."""
    items = items[np.argsort(rcode[items], kind="stable")]
    codes = rcode[items]
    lo = np.searchsorted(codes, lcode, side="left")
    counts = np.where(asked, np.searchsorted(codes, lcode, side="right") - lo, 0).astype(np.int64)
    hit = np.full(lcode.size, -1, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    first = 0
    while first < lcode.size:
        last = max(first + 1, int(np.searchsorted(bounds, bounds[first] + PAIRS_PER_CHUNK, side="right")) - 1)
        rows = np.arange(first, min(last, lcode.size), dtype=np.int64)
        _pick_chunk(rows, counts, lo, items, cutoff, start, ends, priority, hit)
        first = int(rows[-1]) + 1
    return hit


def _pick_chunk(rows: Ints, counts: Ints, lo: Ints, items: Ints, cutoff: Ints, start: Ints, ends: Ints, priority: Ints, hit: Ints) -> None:
    """Fill ``hit`` for the base ``rows``: the candidate with the largest priority."""
    per = counts[rows]
    left = np.repeat(rows, per)
    if left.size == 0:
        return
    offsets = np.arange(left.size, dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
    cand = items[lo[left] + offsets]
    ok = (start[cand] <= cutoff[left]) & (cutoff[left] < ends[cand])
    left, cand = left[ok], cand[ok]
    if left.size == 0:
        return
    order = np.lexsort((priority[cand], left))
    left, cand = left[order], cand[order]
    last = np.r_[left[1:] != left[:-1], True]
    hit[left[last]] = cand[last]


__all__ = ["BATCH", "NEVER", "RECORDED_AT", "known_at_pick", "superseded_at"]
