"""The split assignment's peak memory at a size: streamed (the build's path) or whole-table (the path before issue 22).

    python -m benchmarks.bench_split_memory --rows 1000000 [--path streamed|whole]

The examples are generated inside a build engine (DuckDB, 256 MiB), so no Python or Arrow memory holds them; then the
assignment runs once (``hash-split/1`` on a string example id, an entity column) and the script prints, as JSON, the
peak of the Arrow memory pool, the peak of Python's allocations (tracemalloc: numpy, bytes, lists) and the process's
peak RSS above what it held before the assignment (DuckDB's buffer pool included). Each run is its own process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.identity.example_id import with_example_id
from dsv_platform.core.splits.policy import assign_examples, policy_from_config
from dsv_platform.core.splits.split_checks import assignment_hash, splits_are_entity_disjoint
from dsv_platform.services.publication.examples import EngineExamples
from dsv_platform.services.publication.parts import parquet_bytes
from dsv_platform.services.publication.split_assignment import Splitting, assign_splits

CONTRACT = {
    "name": "examples",
    "key": ["example"],
    "columns": [{"name": "example", "type": "string"}, {"name": "account", "type": "string"}, {"name": "amount", "type": "int64"}],
}
POLICY = {"policy": "hash-split/1", "salt": "bench", "bounds": "train=80,validation=90,test=100"}
GENERATE = "SELECT 'ex-' || lpad(CAST(hash(i) % 1000000000000 AS VARCHAR), 12, '0') || '-' || CAST(i AS VARCHAR) AS example, "
GENERATE += "'acct-' || CAST(i % 200000 AS VARCHAR) AS account, i AS amount FROM range({rows}) t(i)"


def whole(examples: EngineExamples, split: Splitting, store: LocalObjectStore) -> str:
    """The build's split assignment before issue 22: the narrow columns whole, sorted, written and hashed in memory."""
    narrow = with_example_id(examples.select(["example", "account"]), split.contract)
    checked, stored = assign_examples(narrow, split.policy, "example", split.entity_column)
    store.put(parquet_bytes(stored))
    splits_are_entity_disjoint(checked, split.entity_column)
    return assignment_hash(stored, "example")


def measure(rows: int, path: str) -> dict[str, Any]:
    contract = parse_contract(CONTRACT)
    split = Splitting(contract, policy_from_config(POLICY, identifier="example", file="bench"), "account")
    with tempfile.TemporaryDirectory() as tmp:
        limits = EngineLimits(memory=256 << 20, spill_root=Path(tmp) / "spill")
        store = LocalObjectStore(Path(tmp) / "objects")
        with engine(limits) as con:
            con.execute(f"CREATE TABLE __examples AS {GENERATE.format(rows=rows)}")
            examples = EngineExamples(con, "__examples", contract)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
            tracemalloc.start()
            started = time.perf_counter()
            digest = whole(examples, split, store) if path == "whole" else assign_splits(split, examples, store, limits)[1].assignment_hash
            seconds = time.perf_counter() - started
            python_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10
    mib = 1 << 20
    arrow_peak = pa.default_memory_pool().max_memory()
    return {"rows": rows, "path": path, "seconds": round(seconds, 2), "arrow_peak_mib": round(arrow_peak / mib, 1),
            "python_peak_mib": round(python_peak / mib, 1), "rss_growth_mib": round((peak - before) / mib, 1), "assignment_hash": digest}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--path", choices=["streamed", "whole", "both"], default="both")
    parser.add_argument("--one", action="store_true", help="measure in this process (what each subprocess runs)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.rows[0], args.path)))
        return
    for rows in args.rows:
        for path in ["whole", "streamed"] if args.path == "both" else [args.path]:
            run = [sys.executable, "-m", "benchmarks.bench_split_memory", "--one", "--rows", str(rows), "--path", path]
            print(subprocess.run(run, check=True, capture_output=True, text=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
