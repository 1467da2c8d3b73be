"""The cost of refusing invalid UTF-8 on the hashing path: per-batch checks vs ``hash_table``, in one run.

``python -m benchmarks.bench_utf8 [ROWS]``; the ratio is what counts (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pyarrow as pa

from benchmarks.data import make_table, transactions_contract
from dsv_platform.core.identity import hashing
from dsv_platform.core.identity.streaming import _first_invalid_utf8, check_batch


def _best(step: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times)


def main(rows: int = 2_000_000) -> None:
    table, contract = make_table(rows), transactions_contract()
    batches = table.to_batches(max_chunksize=1 << 17)
    strings = [c for b in batches for c in b.columns if pa.types.is_string(c.type)]
    hash_s = _best(lambda: hashing.hash_table(table, contract), 3)

    def checks() -> None:
        for batch in batches:
            check_batch(batch, contract, "bench")

    checks_s = _best(checks, 5)
    utf8_s = _best(lambda: [_first_invalid_utf8(c) for c in strings], 5)
    print(f"rows {rows:,}: hash_table {hash_s:.3f} s; check_batch {checks_s:.3f} s ({checks_s / hash_s:.3f}x);", end=" ")
    print(f"UTF-8 validation {utf8_s:.3f} s ({utf8_s / hash_s:.3f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000)
