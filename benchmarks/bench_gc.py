"""(g) GC planning time at 1M objects / 20 s (target <= 1x).

Runs benchmarks/gc_bench.py at ``scale`` (1.0 = 100k realizations, 1M objects, 10k
retention roots) on a synthetic SQLite registry in a temporary folder. The planning
time is inventory (registry and listing read) plus plan; the impact query is reported
next to it. ``python -m benchmarks.run --gc-scale 0.05`` makes a quick check.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks import gc_bench
from benchmarks.common import Result
from benchmarks.data import DATA_DIR

TARGET_S = 20.0


def run(rows: int, scale: float = 1.0) -> Result:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dsv-bench-gc-", dir=DATA_DIR) as tmp:
        figures = gc_bench.run(scale, Path(tmp))
    plan_s = figures["plan_total_s"]
    ratio = plan_s / TARGET_S
    details = {
        "scale": scale,
        **figures,
        "plan_only_s": round(plan_s - figures["inventory_s"], 2),
    }
    return Result(
        f"g) GC plan (inventory + plan) at {figures['objects']:,} objects / {TARGET_S:g} s",
        ratio,
        "<= 1x",
        ratio <= 1.0,
        details,
        "" if scale == 1.0 else f"scale {scale:g}: the target is for scale 1.0 (1M objects)",
    )
