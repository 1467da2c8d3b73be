"""(e) Peak RSS of `dsv hash` (a subprocess) / Arrow size of the largest partition (target <= 2x)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq

from benchmarks.bench_dvc import dsv_executable
from benchmarks.common import Result, timed
from benchmarks.data import dataset, transactions_contract

TARGET = 2.0


def run(rows: int) -> Result:
    folder, contract_file = dataset(rows)
    contract = transactions_contract()
    # The benchmark contract is unpartitioned: the largest partition is the whole table.
    arrow_bytes = pq.read_table(folder, columns=contract.column_names).combine_chunks().nbytes
    # A fresh wrapper process whose only child is `dsv hash`, so RUSAGE_CHILDREN is that child's peak.
    command = [*dsv_executable(), "hash", str(folder), "--contract", str(contract_file)]
    wrapper = (
        f"import resource, subprocess; subprocess.run({command!r}, check=True, capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    wall, out = timed(lambda: subprocess.run([sys.executable, "-c", wrapper], check=True, capture_output=True, text=True))
    peak = int(json.loads(out.stdout.strip())) * 1024
    note = ""
    ratio = peak / arrow_bytes
    return Result(
        "e) peak RSS / largest partition (Arrow)",
        ratio,
        f"<= {TARGET:g}x",
        ratio <= TARGET,
        {"rows": rows, "peak_rss_mb": round(peak / 2**20), "partition_arrow_mb": round(arrow_bytes / 2**20), "wall_s": round(wall, 2)},
        note,
    )
