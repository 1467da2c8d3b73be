"""(m) Multi-partition scaling: `dsv hash --jobs 1` wall time / `dsv hash --jobs 2` (target >= 1.5x, aspirational).

The data is the benchmark table plus a ``region`` column of 12 keys of similar size
(benchmarks/data.py ``partitioned_dataset``), hashed with ``--partition-by region``.
Each setting runs REPEAT times as a subprocess, interleaved; medians are compared and
every run must print the same content hash.
"""

from __future__ import annotations

import json
import statistics
import subprocess

from benchmarks.bench_dvc import dsv_executable
from benchmarks.common import Result, timed
from benchmarks.data import REGIONS, partitioned_dataset

TARGET = 1.5
REPEAT = 3
JOBS = (1, 2)


def hash_once(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of one `dsv hash --json` subprocess and the content hash it printed."""
    seconds, done = timed(lambda: subprocess.run(argv, check=True, capture_output=True, text=True))
    return seconds, json.loads(done.stdout)["content_hash"]


def run(rows: int) -> Result:
    folder, contract_file = partitioned_dataset(rows)
    times: dict[int, list[float]] = {jobs: [] for jobs in JOBS}
    hashes: dict[int, set[str]] = {jobs: set() for jobs in JOBS}
    for _ in range(REPEAT):  # interleaved: a change of load hits both settings alike
        for jobs in JOBS:
            argv = [*dsv_executable(), "hash", str(folder), "--contract", str(contract_file), "--partition-by", "region", "--jobs", str(jobs), "--json"]
            seconds, content_hash = hash_once(argv)
            times[jobs].append(seconds)
            hashes[jobs].add(content_hash)
    medians = {jobs: statistics.median(ts) for jobs, ts in times.items()}
    same = len(hashes[1] | hashes[2]) == 1
    ratio = medians[1] / medians[2]
    return Result(
        "m) multi-partition scaling: `dsv hash --jobs 1` / `--jobs 2` (wall)",
        ratio,
        f">= {TARGET:g}x (aspirational)",
        ratio >= TARGET and same,
        {
            "rows": rows,
            "partitions": len(REGIONS),
            "repeat": REPEAT,
            "jobs1_median_s": round(medians[1], 2),
            "jobs2_median_s": round(medians[2], 2),
            "jobs1_runs_s": [round(t, 2) for t in times[1]],
            "jobs2_runs_s": [round(t, 2) for t in times[2]],
            "same_digest": same,
        },
        "aspirational on 2 cores: reading and splitting by key stay serial in the parent, and `--jobs 1` already encodes on two threads",
    )
