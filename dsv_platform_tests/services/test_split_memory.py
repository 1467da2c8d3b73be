"""The split assignment does not hold its rows (issue 22): its Arrow memory peak is flat in the number of examples.

The examples are generated inside a build engine, so nothing outside DuckDB holds them; the assignment then runs with a
fresh proxy of the Arrow memory pool as the default, whose peak is the assignment's own. Four times the rows must not
raise that peak by more than a fraction: the whole-table path (every example's id, entity and split at once, ~50 bytes
a row) grows about fourfold. ``benchmarks/bench_split_memory.py`` measures both paths at millions of rows.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.splits.policy import policy_from_config
from dsv_platform.services.publication.examples import EngineExamples
from dsv_platform.services.publication.split_assignment import Splitting, assign_splits

CONTRACT = {
    "name": "examples",
    "key": ["example"],
    "columns": [{"name": "example", "type": "string"}, {"name": "account", "type": "string"}, {"name": "amount", "type": "int64"}],
}
POLICY = {"policy": "hash-split/1", "salt": "memory", "bounds": "train=80,validation=90,test=100"}
GENERATE = (
    "SELECT 'example-' || lpad(CAST(hash(i) % 1000000000000 AS VARCHAR), 12, '0') || '-' || CAST(i AS VARCHAR) AS example, "
    "'account-' || CAST(i % 50000 AS VARCHAR) AS account, i AS amount FROM range({rows}) t(i)"
)


def arrow_peak(rows: int, tmp: Path) -> int:
    """The Arrow memory the streamed assignment of ``rows`` generated examples holds at its peak (bytes)."""
    contract = parse_contract(CONTRACT)
    split = Splitting(contract, policy_from_config(POLICY, identifier="example", file="memory.yaml"), "account")
    limits = EngineLimits(memory=128 << 20, threads=2, spill_root=tmp / "spill")
    with engine(limits) as con:
        con.execute(f"CREATE TABLE __examples AS {GENERATE.format(rows=rows)}")
        examples = EngineExamples(con, "__examples", contract)
        previous = pa.default_memory_pool()
        pool = pa.proxy_memory_pool(previous)
        pa.set_memory_pool(pool)
        try:
            summary, _ = assign_splits(split, examples, LocalObjectStore(tmp / "objects"), limits)
        finally:
            pa.set_memory_pool(previous)
    assert summary.rows == rows
    return int(pool.max_memory())


@pytest.mark.slow  # about 20 s on a loaded 2-core machine: 1.5M rows hashed
def test_the_assignment_peak_does_not_grow_with_the_rows(tmp_path: Path) -> None:
    """300k rows (past two Parquet row groups: the peak's steady state) and four times as many."""
    small, large = arrow_peak(300_000, tmp_path / "small"), arrow_peak(1_200_000, tmp_path / "large")
    assert large < 1.25 * small, f"Arrow peak {small >> 20} MiB at 300k rows, {large >> 20} MiB at 1.2M: it grows with the rows"
