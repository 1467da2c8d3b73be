"""`dsv hash` and `dsv canonical`: the content identity of Parquet data under a contract."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO

from dsv_platform.adapters.objects.parquet_source import count_rows, discover_parquet, iter_batches
from dsv_platform.cli.progress import row_progress
from dsv_platform.core.contracts.contract import Contract, load_contract
from dsv_platform.core.errors import FileAccessError, InputError
from dsv_platform.core.identity.hashing import DatasetDigest, iter_canonical_chunks
from dsv_platform.core.identity.streaming import iter_partitions
from dsv_platform.services.publication.parallel_hash import default_jobs, hash_parallel


def _inputs(args: argparse.Namespace) -> tuple[Contract, list[Path], str | None]:
    contract = load_contract(args.contract)
    files = discover_parquet(args.path)
    partition_by = args.partition_by or contract.partition_by
    if partition_by is not None:
        contract.column(partition_by)  # a clear error naming the column
    return contract, files, partition_by


def digest_files(contract: Contract, files: list[Path], partition_by: str | None, *, progress: bool | None = None, jobs: int = 1) -> DatasetDigest:
    """The digest of Parquet files; ``jobs`` > 1 hashes that many partitions at once (same digest for every value)."""
    total = count_rows(files)
    with row_progress("hashing", total, enabled=progress) as advance:
        batches = iter_batches(files, contract.column_names)
        return hash_parallel(batches, contract, partition_by=partition_by, jobs=jobs, progress=advance)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _warn_if_empty(args: argparse.Namespace, rows: int) -> None:
    """An empty input is an explicit empty result with a warning on stderr, never a silent exit 0."""
    if rows == 0:
        print(f"dsv: warning: {args.path}: 0 rows; the result is the empty dataset's", file=sys.stderr)


def _hash(args: argparse.Namespace) -> int:
    contract, files, partition_by = _inputs(args)
    digest = digest_files(contract, files, partition_by, jobs=args.jobs)
    _warn_if_empty(args, digest.rows)
    if args.json:
        print(json.dumps(digest.to_document(), indent=2))
        return 0
    lines = [f"content_hash  {digest.content_hash}", f"schema_hash   {digest.schema_hash}", f"rows          {digest.rows}", "partitions:"]
    width = max((len(p.key) for p in digest.partitions), default=0)
    lines += [f"  {p.key:<{width}}  {p.hash}  {p.rows:>12,} rows" for p in digest.partitions]
    print("\n".join(lines))
    return 0


def _write_canonical(args: argparse.Namespace, sink: IO[bytes]) -> int:
    """Encode every partition into ``sink`` (a temporary file); any failure raises before a byte reaches the real output."""
    contract, files, partition_by = _inputs(args)
    keys: list[str] = []
    rows = 0
    for key, table in iter_partitions(iter_batches(files, contract.column_names), contract, partition_by=partition_by):
        keys.append(key)
        rows += table.num_rows
        if args.partition is not None and key != args.partition:
            # Still encoded: an error in any partition refuses the whole command.
            for _ in iter_canonical_chunks(table, contract):
                pass
            continue
        sink.writelines(bytes(c) for c in iter_canonical_chunks(table, contract))
    if args.partition is not None and args.partition not in keys:
        shown = ", ".join(keys[:20]) + (f", ... ({len(keys)} in all)" if len(keys) > 20 else "")
        raise InputError(f"{args.path}: no partition {args.partition!r}; the partitions are: {shown or '(none: no rows)'}")
    return rows


def _canonical(args: argparse.Namespace) -> int:
    """All or nothing: the text goes to a temporary file first, then to ``--out`` (renamed into place) or stdout."""
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        raise FileAccessError(f"{out.parent}: no such folder for --out")
    with tempfile.NamedTemporaryFile(dir=out.parent if out else None, prefix=".dsv-canonical-", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            rows = _write_canonical(args, tmp)
        except BaseException:
            tmp.close()
            tmp_path.unlink(missing_ok=True)
            raise
    _warn_if_empty(args, rows)
    if out is not None:
        os.replace(tmp_path, out)
        return 0
    try:
        with tmp_path.open("rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    finally:
        tmp_path.unlink(missing_ok=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("path", help="a Parquet file or a folder of them (any row order, any file layout)")
    common.add_argument("--contract", required=True, help="the contract YAML file")
    common.add_argument("--partition-by", metavar="COLUMN", help="partition column (default: the contract's partition_by, else one partition 'all')")

    p = sub.add_parser("hash", parents=[common], help="content hash, schema hash and partition hashes of Parquet data")
    p.add_argument("--json", action="store_true", help="one JSON object: content_hash, schema_hash, rows, partitions")
    p.add_argument(
        "--jobs",
        type=_jobs,
        default=default_jobs(),
        metavar="N",
        help="hash up to N partitions at once in worker processes (default: the CPU count; 1: serial); the output is the same for every N",
    )
    p.set_defaults(handler=_hash)

    c = sub.add_parser(
        "canonical",
        parents=[common],
        help="write the canonical row text to stdout (per partition, in key order); sha256sum of one partition's text is its hash",
    )
    c.add_argument("--partition", metavar="KEY", help="write only this partition (e.g. 'date=2026-03-14'); an unknown key is an error listing the partitions")
    c.add_argument("--out", metavar="FILE", help="write the text to FILE (renamed into place only when every partition encoded) instead of stdout")
    c.set_defaults(handler=_canonical)
