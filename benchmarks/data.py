"""Deterministic benchmark data: the ``transactions`` shape, as Parquet files in random key order.

Generated once per row count under ``benchmarks/.data/`` (git-ignored) and
reused. The same seed always yields the same files, so hashes are comparable
between runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsv_platform.core.contracts.contract import Contract, parse_contract

DATA_DIR = Path(__file__).resolve().parent / ".data"
SEED = 20260314
FILES = 10
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "JPY", "SEK"]
NOTE_PIECES = ["refund", "chargeback\tpending", "line1\nline2", "C:\\temp\\x", "ok", "weird\r\x0b\x0c\x08end", "caf\u00e9", "transfer to savings", ""]

CONTRACT_DOC: dict[str, Any] = {
    "name": "transactions",
    "key": ["transaction_id"],
    "columns": [
        {"name": "transaction_id", "type": "int64"},
        {"name": "account", "type": "string"},
        {"name": "amount", "type": "decimal", "precision": 18, "scale": 2},
        {"name": "currency", "type": "string"},
        {"name": "created_at", "type": "timestamp", "resolution": "us"},
        {"name": "is_fraud", "type": "bool"},
        {"name": "note", "type": "string", "nullable": True},
    ],
}


REGIONS = [f"r{i:02d}" for i in range(12)]  # the partitioned variant's partition column: 12 keys of similar size
PARTITIONED_DOC: dict[str, Any] = {
    **CONTRACT_DOC,
    "name": "transactions_by_region",
    "columns": [*CONTRACT_DOC["columns"], {"name": "region", "type": "string"}],
}


def transactions_contract() -> Contract:
    return parse_contract(CONTRACT_DOC, source="benchmarks/transactions")


def contract_yaml() -> str:
    import yaml

    return yaml.safe_dump(CONTRACT_DOC, sort_keys=False)


def make_table(rows: int, seed: int = SEED) -> pa.Table:
    """``rows`` transactions in random key order (vectorized; ~1 s per million rows)."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows).astype(np.int64) * 7 + 1_000_000_000
    account_no = rng.integers(0, 500_000, rows)
    account = pc.binary_join_element_wise("acct-", pc.utf8_lpad(pc.cast(pa.array(account_no), pa.string()), 7, "0"), "")
    unscaled = rng.integers(-5_000_000, 50_000_000, rows).astype(np.int64)
    unscaled[::97] = rng.integers(-99, 100, len(unscaled[::97]))  # |x| < 1, including zero
    words = np.empty((rows, 2), dtype=np.int64)
    words[:, 0], words[:, 1] = unscaled, unscaled >> 63
    amount = pa.Array.from_buffers(pa.decimal128(18, 2), rows, [None, pa.py_buffer(words)])
    currency = pc.take(pa.array(CURRENCIES), pa.array(rng.integers(0, len(CURRENCIES), rows)))
    created = pa.array(1_767_225_600_000_000 + rng.integers(0, 86_400_000_000 * 365, rows), pa.timestamp("us", tz="UTC"))
    fraud = pa.array(rng.random(rows) < 0.02)
    pieces = pa.array(NOTE_PIECES)
    a = pc.take(pieces, pa.array(rng.integers(0, len(NOTE_PIECES), rows)))
    b = pc.take(pieces, pa.array(rng.integers(0, len(NOTE_PIECES), rows)))
    note = pc.binary_join_element_wise(a, pc.cast(pa.array(rng.integers(0, 10**6, rows)), pa.string()), b, " #")
    note = pc.if_else(pa.array(rng.random(rows) < 0.3), pa.scalar(None, pa.string()), note)
    return pa.table({"transaction_id": ids, "account": account, "amount": amount, "currency": currency, "created_at": created, "is_fraud": fraud, "note": note})


def dataset(rows: int) -> tuple[Path, Path]:
    """(folder of ``FILES`` Parquet files, contract file) for ``rows`` rows, generated on first use."""
    folder = DATA_DIR / f"transactions-{rows}"
    contract_file = DATA_DIR / "transactions.yaml"
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    if not contract_file.exists():
        contract_file.write_text(contract_yaml(), encoding="utf-8")
    done = folder / "_COMPLETE"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        table = make_table(rows)
        per = -(-rows // FILES)
        for i in range(FILES):
            pq.write_table(table.slice(i * per, per), folder / f"part-{i:02d}.parquet", row_group_size=1 << 20)
        done.write_text(str(rows))
    return folder, contract_file


def partitioned_dataset(rows: int) -> tuple[Path, Path]:
    """:func:`dataset` plus a ``region`` column (12 values, uniform): the files and contract for ``--partition-by region``."""
    import yaml

    source, _ = dataset(rows)
    folder = DATA_DIR / f"transactions-by-region-{rows}"
    contract_file = DATA_DIR / "transactions-by-region.yaml"
    if not contract_file.exists():
        contract_file.write_text(yaml.safe_dump(PARTITIONED_DOC, sort_keys=False), encoding="utf-8")
    done = folder / "_COMPLETE"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(SEED + 1)
        for path in sorted(source.glob("*.parquet")):
            table = pq.read_table(path)
            region = pc.take(pa.array(REGIONS), pa.array(rng.integers(0, len(REGIONS), table.num_rows)))
            pq.write_table(table.append_column("region", region), folder / path.name, row_group_size=1 << 20)
        done.write_text(str(rows))
    return folder, contract_file
