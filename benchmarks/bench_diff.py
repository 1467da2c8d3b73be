"""(f) Row-level diff of two tables differing in ~1% of rows / canonical hashing of both (target <= 3x).

The two tables are the benchmark transactions (random key order) and a copy with 0.5% of
rows edited (amount, or the is_fraud label), 0.25% removed and 0.25% added, in another
row order. Both sides are in memory: the ratio compares computation, not I/O.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import Result
from benchmarks.data import make_table, transactions_contract
from dsv_platform.core.diff.diff import diff_rows
from dsv_platform.core.identity import hashing

TARGET = 3.0
EDITED, REMOVED, ADDED = 0.005, 0.0025, 0.0025


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def cpu_timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, process CPU seconds, value): on a shared machine the CPU time is the steadier measure."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def changed_copy(a: pa.Table, seed: int = 1) -> tuple[pa.Table, dict[str, int]]:
    """``a`` with ~1% of its rows different: edited, removed and added rows, shuffled."""
    rng = np.random.default_rng(seed)
    n = a.num_rows
    pick = rng.permutation(n)
    edited, removed, added = (pick[: int(n * EDITED)], pick[int(n * EDITED) : int(n * (EDITED + REMOVED))], pick[-int(n * ADDED) :])
    amount = a.column("amount").combine_chunks()
    unscaled = np.frombuffer(amount.buffers()[1], dtype=np.int64).reshape(-1, 2).copy()
    half = edited[: len(edited) // 2]
    unscaled[half, 0] += 1  # one cent more (stays within the decimal's range)
    b = a.set_column(a.schema.get_field_index("amount"), "amount", pa.Array.from_buffers(amount.type, n, [None, pa.py_buffer(unscaled)]))
    fraud = b.column("is_fraud").to_numpy().copy()
    fraud[edited[len(edited) // 2 :]] ^= True  # the other half: a label flip
    b = b.set_column(b.schema.get_field_index("is_fraud"), "is_fraud", pa.array(fraud))
    keep = np.ones(n, dtype=bool)
    keep[removed] = False
    new = a.take(pa.array(added))
    new = new.set_column(0, "transaction_id", pc.add(new.column("transaction_id"), pa.scalar(10**12, pa.int64())))
    b = pa.concat_tables([b.filter(pa.array(keep)), new]).combine_chunks()
    b = b.take(pa.array(rng.permutation(b.num_rows)))
    return b, {"edited": len(edited), "removed": len(removed), "added": len(added)}


def run(rows: int) -> Result:
    contract = transactions_contract()
    a = make_table(rows).combine_chunks()
    b, truth = changed_copy(a)
    load_before = _load()
    hash_a_s, hash_a_cpu, _ = cpu_timed(lambda: hashing.hash_table(a, contract))
    hash_b_s, hash_b_cpu, _ = cpu_timed(lambda: hashing.hash_table(b, contract))
    diff_s, diff_cpu, diff = cpu_timed(lambda: diff_rows(a, b, contract.key, label_columns=["is_fraud"], examples=10))
    assert (diff.added.count, diff.removed.count, diff.changed.count) == (truth["added"], truth["removed"], truth["edited"]), diff
    (flips,) = diff.flips
    assert flips.up.count + flips.down.count == truth["edited"] - truth["edited"] // 2
    ratio = diff_s / (hash_a_s + hash_b_s)
    details: dict[str, object] = {
        "rows": rows,
        "rows_b": b.num_rows,
        "edited_removed_added": f"{truth['edited']} / {truth['removed']} / {truth['added']}",
        "diff_s": round(diff_s, 3),
        "hash_a_s": round(hash_a_s, 3),
        "hash_b_s": round(hash_b_s, 3),
        "cpu_s_diff_hash_a_hash_b": f"{diff_cpu:.2f} / {hash_a_cpu:.2f} / {hash_b_cpu:.2f}",
        "cpu_ratio": round(diff_cpu / (hash_a_cpu + hash_b_cpu), 2),
        "column_changes": dict(diff.columns),
        "label_flips": f"0->1 {flips.up.count}, 1->0 {flips.down.count}",
        "load_average_before_after": f"{load_before} / {_load()}",
    }
    return Result("f) diff of two tables (~1% rows differ) / canonical hashing of both", ratio, f"<= {TARGET:g}x", ratio <= TARGET, details)
