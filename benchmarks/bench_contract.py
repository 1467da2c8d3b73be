"""(s) Semantic contract check time / canonical hashing time over the same in-memory table (target <= 1x).

The contract is the benchmark's ``transactions`` contract with one rule of every
family (values, completeness, plausibility, population, uniqueness, volume, drift);
the baseline for drift and volume is a second generated table of the same size.
"""

from __future__ import annotations

import copy
import os

import pyarrow.parquet as pq

from benchmarks.common import Result, timed
from benchmarks.data import CONTRACT_DOC, CURRENCIES, dataset, make_table
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.contracts.semantic_rules import evaluate
from dsv_platform.core.identity import hashing

TARGET = 1.0


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def ruled_contract_doc() -> dict[str, object]:
    doc = copy.deepcopy(CONTRACT_DOC)
    cols = {c["name"]: c for c in doc["columns"]}
    cols["amount"].update({"range": {"min": -100_000, "max": 1_000_000}, "typical": {"p50": [1_000, 500_000], "p99": [10_000, 1_000_000]}})
    cols["amount"]["drift"] = {"p01_max_change": 0.5, "p50_max_change": 0.2, "p99_max_change": 0.2}
    cols["currency"].update({"allowed_values": CURRENCIES, "drift": {"psi_max": 0.1, "tv_max": 0.05}})
    cols["note"].update({"max_null_rate": 0.5, "unknown_values": ["", "ok"], "max_unknown_rate": 0.5})
    cols["is_fraud"]["drift"] = {"tv_max": 0.01}
    doc["expectations"] = {"unique": True, "population": [{"column": "account", "not_matching": "^test-"}], "max_volume_change": 0.2}
    return doc


def run(rows: int) -> Result:
    folder, _ = dataset(rows)
    contract = parse_contract(ruled_contract_doc(), source="benchmarks/transactions")
    table = pq.read_table(folder, columns=contract.column_names).combine_chunks()
    baseline = make_table(rows, seed=7).select(contract.column_names)
    load_before = _load()
    hash_s, _ = timed(lambda: hashing.hash_table(table, contract))
    check_s, results = timed(lambda: evaluate(table, contract, baseline))
    failed = [f"{r.rule}:{r.column}" for r in results if not r.passed]
    assert not [r for r in results if r.blocking and not r.passed], failed
    ratio = check_s / hash_s
    by_family: dict[str, int] = {}
    for r in results:
        by_family[r.family] = by_family.get(r.family, 0) + 1
    details: dict[str, object] = {
        "rows": rows,
        "rules": len(results),
        "rules_by_family": by_family,
        "contract_check_s": round(check_s, 3),
        "hash_table_s": round(hash_s, 3),
        "failed_warnings": failed,
        "load_average_before_after": f"{load_before} / {_load()}",
    }
    return Result("s) semantic contract check / canonical hash", ratio, f"<= {TARGET:g}x", ratio <= TARGET, details)
