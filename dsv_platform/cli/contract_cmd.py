"""`dsv contract check`: a contract's semantic rules on Parquet data, outside the pipeline.

Exit 0 when every blocking rule passes, BREAKING's exit code (core/publication/failures.py) when one fails (one line per failed rule:
column, rule, observed value, bound). A bad contract or unreadable data is the usual
typed error with its exit code. Details: docs/contracts.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa

from dsv_platform.adapters.objects.parquet_source import discover_parquet, iter_batches
from dsv_platform.core.contracts.contract import Contract, load_contract
from dsv_platform.core.contracts.semantic_rules import evaluate, passed
from dsv_platform.core.errors import FailureKind, InputError
from dsv_platform.core.publication.failures import exit_code

RULE_FAILED_EXIT = exit_code(FailureKind.BREAKING)
"""A blocking rule of the contract failed on the data."""


def read_table(path: str, contract: Contract) -> pa.Table:
    """Every row of the Parquet data at ``path`` (file or folder), the contract's columns, typed by the contract."""
    files: list[Path] = discover_parquet(path)
    batches = [b for _, b in iter_batches(files, contract.column_names)]
    table = pa.Table.from_batches(batches) if batches else contract.arrow_schema.empty_table()
    try:
        return table.cast(contract.arrow_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{path}: the data does not fit the contract's column types ({' '.join(str(exc).split())[:200]})") from exc


def _check(args: argparse.Namespace) -> int:
    contract = load_contract(args.contract)
    table = read_table(args.path, contract)
    baseline = read_table(args.baseline, contract) if args.baseline else None
    results = evaluate(table, contract, baseline)
    ok = passed(results)
    if args.json:
        rules = [{k: v for k, v in r.to_document().items() if k != "family"} | {"family": r.family} for r in results]
        print(json.dumps({"passed": ok, "rules": rules}))
        return 0 if ok else RULE_FAILED_EXIT
    for r in results:
        status = "ok" if r.passed else ("FAILED" if r.blocking else "warning")
        print(f"{status:<8} {r.line()}")
    failed = [r for r in results if r.blocking and not r.passed]
    print(f"{table.num_rows} rows, {len(results)} rules: " + (f"{len(failed)} blocking rule(s) failed" if failed else "every blocking rule passed"))
    return 0 if ok else RULE_FAILED_EXIT


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("contract", help="contract tools: check a contract's semantic rules on Parquet data")
    csub = p.add_subparsers(dest="contract_command", metavar="SUBCOMMAND")
    csub.required = True
    c = csub.add_parser("check", help="run the contract's rules (values, completeness, plausibility, population, uniqueness, volume, drift)")
    c.add_argument("path", help="a Parquet file or a folder of them")
    c.add_argument("--contract", required=True, help="the contract YAML file")
    c.add_argument("--baseline", metavar="PATH", help="Parquet data to compare drift and volume against (a file or folder)")
    c.add_argument("--json", action="store_true", help="one JSON object: {passed, rules: [{rule, column, severity, passed, observed, bound}]}")
    c.set_defaults(handler=_check)
