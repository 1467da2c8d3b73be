"""(b) Speed-up over the naive approach: pandas sort_values, per-value Python formatting, to_csv, one SHA-256 (target >= 20x)."""

from __future__ import annotations

import csv
import hashlib
import io
from decimal import Decimal

import pandas as pd
import pyarrow.parquet as pq

from benchmarks.common import Result, timed
from benchmarks.data import dataset, transactions_contract
from dsv_platform.core.identity import hashing

TARGET = 20.0
ROWS = 1_000_000
_ESC = str.maketrans({"\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"})


def _text(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, pd.Timestamp):
        return str(value.value // 1000)  # ns -> us
    if isinstance(value, str):
        return value.translate(_ESC)
    return str(value)


def naive_hash(df: pd.DataFrame, key: str) -> str:
    df = df.sort_values(key, kind="stable")
    formatted = pd.DataFrame({c: [_text(v) for v in df[c].astype(object)] for c in df.columns})
    buf = io.StringIO()
    formatted.to_csv(buf, sep="\t", header=False, index=False, lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar=None)
    return hashlib.sha256(buf.getvalue().encode("utf-8")).hexdigest()


def run(rows: int) -> Result:
    rows = min(rows, ROWS)
    folder, _ = dataset(rows)
    contract = transactions_contract()
    table = pq.read_table(folder, columns=contract.column_names).combine_chunks()
    df = table.to_pandas(types_mapper=None)
    naive_s, naive = timed(lambda: naive_hash(df, "transaction_id"))
    fast_s, digest = timed(lambda: hashing.hash_table(table, contract))
    same = naive == digest.partitions[0].hash
    ratio = naive_s / fast_s
    return Result(
        "b) speed-up over naive pandas",
        ratio,
        f">= {TARGET:g}x",
        ratio >= TARGET,
        {"rows": rows, "naive_s": round(naive_s, 3), "dsv_s": round(fast_s, 3), "same_hash": same},
        "" if same else "the naive hash differs from the canonical hash",
    )
