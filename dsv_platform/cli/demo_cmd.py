"""`dsv demo`: the embedded default, end to end, with no servers to start.

Generates a month of sample transactions as Parquet files in a shuffled
layout, hashes them per daily partition under the transactions contract,
then rewrites the same rows in a different order and file layout and shows
that the content identity does not move, while one changed value moves exactly
one partition leaf and the root.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.adapters.parquet_source import discover_parquet
from dsv_platform.cli.hash_cmd import digest_files
from dsv_platform.core.contract import Contract, load_contract
from dsv_platform.core.hashing import DatasetDigest
from dsv_platform.core.sample_data import days, transactions_for_day
from dsv_platform.settings import load_settings


def bundled_contract(name: str) -> Contract:
    with resources.as_file(resources.files("dsv_platform") / "contracts" / f"{name}.yaml") as path:
        return load_contract(path)


def _write_layout(table: pa.Table, folder: Path, files: int, seed: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    order = np.random.default_rng(seed).permutation(table.num_rows)
    shuffled = table.take(pa.array(order))
    step = -(-table.num_rows // files)
    for i in range(files):
        part = shuffled.slice(i * step, step)
        pq.write_table(part, folder / f"part-{i:03d}.parquet", row_group_size=max(1, 1000 + 997 * i), compression="zstd" if i % 2 else "snappy")


def _show(title: str, digest: DatasetDigest, limit: int = 3) -> None:
    print(f"\n{title}")
    print(f"  content hash {digest.content_hash}")
    print(f"  schema hash  {digest.schema_hash}")
    print(f"  {digest.rows:,} rows in {len(digest.partitions)} daily partitions, e.g.")
    for p in digest.partitions[:limit]:
        print(f"    {p.key}  {p.hash}  {p.rows:,} rows")


def _demo(args: argparse.Namespace) -> int:
    settings = load_settings()
    contract = bundled_contract("transactions")
    root = settings.home / "demo"
    start = dt.date(2026, 6, 1)
    t0 = time.perf_counter()
    table = pa.concat_tables([transactions_for_day(d) for d in days(start, args.days)])
    print(f"generated {table.num_rows:,} sample transactions for {args.days} days ({table.nbytes / 1e6:.1f} MB in Arrow)")

    first = root / "transactions_a"
    _write_layout(table, first, files=7, seed=1)
    digest_a = digest_files(contract, discover_parquet(first), contract.partition_by)
    _show(f"layout A: 7 shuffled files under {first}", digest_a)

    second = root / "transactions_b"
    _write_layout(table, second, files=3, seed=2)
    digest_b = digest_files(contract, discover_parquet(second), contract.partition_by)
    same = "SAME" if digest_b.content_hash == digest_a.content_hash else "DIFFERENT (bug!)"
    print(f"\nlayout B: 3 files, other order, row groups and compression -> content hash {digest_b.content_hash} ({same})")

    changed = root / "transactions_c"
    amounts = table.column("amount").to_pylist()
    amounts[12345 % table.num_rows] += 1
    edited = table.set_column(table.schema.get_field_index("amount"), "amount", pa.array(amounts, table.schema.field("amount").type))
    _write_layout(edited, changed, files=5, seed=3)
    digest_c = digest_files(contract, discover_parquet(changed), contract.partition_by)
    moved = [a.key for a, c in zip(digest_a.partitions, digest_c.partitions) if a.hash != c.hash]
    print(f"one amount + $1 -> content hash {digest_c.content_hash}; partition leaves that moved: {moved}")
    print(f"\ndone in {time.perf_counter() - t0:.1f} s; check any identity yourself:")
    print(f"  .venv/bin/dsv hash {first} --contract dsv_platform/contracts/transactions.yaml")
    print(f"  .venv/bin/dsv canonical {first} --contract dsv_platform/contracts/transactions.yaml --partition event_date=2026-06-01 | sha256sum")
    return 0 if same == "SAME" and len(moved) == 1 else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="run the demo on the embedded default (no servers needed)")
    p.add_argument("--days", type=int, default=30, help="days of sample transactions (default 30)")
    p.set_defaults(handler=_demo)
