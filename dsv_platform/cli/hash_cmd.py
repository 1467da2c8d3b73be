"""`dsv hash` and `dsv canonical`: the content identity of Parquet data under a contract."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dsv_platform.adapters.parquet_source import count_rows, discover_parquet, iter_batches
from dsv_platform.cli.progress import row_progress
from dsv_platform.core.contract import Contract, load_contract
from dsv_platform.core.hashing import DatasetDigest, iter_canonical_chunks
from dsv_platform.core.streaming import hash_batches, iter_partitions


def _inputs(args: argparse.Namespace) -> tuple[Contract, list[Path], str | None]:
    contract = load_contract(args.contract)
    files = discover_parquet(args.path)
    partition_by = args.partition_by or contract.partition_by
    if partition_by is not None:
        contract.column(partition_by)  # a clear error naming the column
    return contract, files, partition_by


def digest_files(contract: Contract, files: list[Path], partition_by: str | None, *, progress: bool | None = None) -> DatasetDigest:
    total = count_rows(files)
    with row_progress("hashing", total, enabled=progress) as advance:
        return hash_batches(iter_batches(files, contract.column_names), contract, partition_by=partition_by, progress=advance)


def _hash(args: argparse.Namespace) -> int:
    contract, files, partition_by = _inputs(args)
    digest = digest_files(contract, files, partition_by)
    if args.json:
        print(json.dumps(digest.to_document(), indent=2))
        return 0
    lines = [f"content_hash  {digest.content_hash}", f"schema_hash   {digest.schema_hash}", f"rows          {digest.rows}", "partitions:"]
    width = max(len(p.key) for p in digest.partitions)
    lines += [f"  {p.key:<{width}}  {p.hash}  {p.rows:>12,} rows" for p in digest.partitions]
    print("\n".join(lines))
    return 0


def _canonical(args: argparse.Namespace) -> int:
    contract, files, partition_by = _inputs(args)
    out = sys.stdout.buffer
    # Encode everything first is not needed: errors can only surface per
    # partition, and a partial stdout is refused by writing to stdout only
    # after the whole partition has encoded.
    for key, table in iter_partitions(iter_batches(files, contract.column_names), contract, partition_by=partition_by):
        if args.partition is not None and key != args.partition:
            continue
        chunks = [bytes(c) for c in iter_canonical_chunks(table, contract)]
        out.writelines(chunks)
    out.flush()
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("path", help="a Parquet file or a folder of them (any row order, any file layout)")
    common.add_argument("--contract", required=True, help="the contract YAML file")
    common.add_argument("--partition-by", metavar="COLUMN", help="partition column (default: the contract's partition_by, else one partition 'all')")

    p = sub.add_parser("hash", parents=[common], help="content hash, schema hash and partition hashes of Parquet data")
    p.add_argument("--json", action="store_true", help="one JSON object: content_hash, schema_hash, rows, partitions")
    p.set_defaults(handler=_hash)

    c = sub.add_parser(
        "canonical",
        parents=[common],
        help="write the canonical row text to stdout (per partition, in key order); sha256sum of one partition's text is its hash",
    )
    c.add_argument("--partition", metavar="KEY", help="write only this partition (e.g. 'date=2026-03-14')")
    c.set_defaults(handler=_canonical)
