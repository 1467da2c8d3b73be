"""(d) Split assignment rate / a plain Python hashlib loop with identical outputs (target >= 1.5x)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from benchmarks.common import Result, timed
from dsv_platform.core.splits.hash_split import HashSplitPolicy

TARGET = 1.5
ROWS = 1_000_000
SALT = "fraud_v6"


def python_loop(ids: list[str]) -> list[int]:
    return [int(hashlib.sha256(f"{SALT}:{i}".encode()).hexdigest(), 16) % 100 for i in ids]


def run(rows: int) -> Result:
    rows = min(rows, ROWS)
    ids = [f"cust-{i:09d}" for i in np.random.default_rng(7).permutation(rows * 3)[:rows]]
    arrow_ids = pa.array(ids, pa.string())
    policy = HashSplitPolicy.from_bounds(SALT, "train=80,validation=90,test=100")
    loop_s, expected = timed(lambda: python_loop(ids))
    fast_s, buckets = timed(lambda: policy.buckets(arrow_ids))
    same = expected == buckets.tolist()
    ratio = loop_s / fast_s
    return Result(
        "d) split assignment rate / Python hashlib loop",
        ratio,
        f">= {TARGET:g}x",
        ratio >= TARGET and same,
        {"ids": rows, "python_loop_s": round(loop_s, 3), "policy_s": round(fast_s, 3), "identical": same},
    )
