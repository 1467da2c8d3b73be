"""Deterministic sample data for the fraud setting: daily card transactions.

Everything is derived from a seed and the day, never from the wall clock, so
the same call yields the same rows (and the same content hash) on any machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pyarrow as pa

CURRENCIES = np.array(["USD", "EUR", "GBP", "CAD"])
NOTES = np.array(["", "refund\trequested", "memo: line one\nline two", "path C:\\shop\\till", "café ☕"], dtype=object)
ROWS_PER_DAY = 2_000
ACCOUNTS = 5_000


def _rng(seed: int, day: dt.date, stream: str) -> np.random.Generator:
    material = hashlib.sha256(f"{seed}:{day.isoformat()}:{stream}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(material[:16], "big")))


def day_ordinal(day: dt.date, start: dt.date) -> int:
    return (day - start).days


def transactions_for_day(day: dt.date, *, seed: int = 7, rows: int = ROWS_PER_DAY, start: dt.date = dt.date(2026, 6, 1)) -> pa.Table:
    """One day's transactions: ids unique across days, amounts in USD cents as decimal(18,2)."""
    rng = _rng(seed, day, "transactions")
    base_id = (day_ordinal(day, start) + 1) * 10_000_000
    ids = base_id + rng.permutation(rows).astype(np.int64)
    accounts = rng.integers(0, ACCOUNTS, rows)
    cents = rng.lognormal(mean=8.0, sigma=1.2, size=rows).astype(np.int64)
    cents[rng.random(rows) < 0.02] *= -1  # refunds
    midnight = int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp()) * 1_000_000
    micros = midnight + rng.integers(0, 86_400_000_000, rows)
    risk = np.round(rng.beta(2.0, 8.0, rows), 6)
    risk_mask = rng.random(rows) < 0.05
    note_idx = rng.integers(0, len(NOTES) * 4, rows)
    notes = np.where(note_idx < len(NOTES), NOTES[np.minimum(note_idx, len(NOTES) - 1)], np.array(None, dtype=object))
    words = np.zeros((rows, 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = cents >> 63
    amount = pa.Array.from_buffers(pa.decimal128(18, 2), rows, [None, pa.py_buffer(words)])
    return pa.table(
        {
            "transaction_id": pa.array(ids, pa.int64()),
            "account_id": pa.array([f"acct_{a:05d}" for a in accounts], pa.string()),
            "amount": amount,
            "currency": pa.array(CURRENCIES[rng.choice(4, rows, p=[0.85, 0.08, 0.05, 0.02])], pa.string()),
            "created_at": pa.array(micros, pa.timestamp("us", tz="UTC")),
            "event_date": pa.array([day] * rows, pa.date32()),
            "card_present": pa.array(rng.random(rows) < 0.6, pa.bool_()),
            "merchant_risk": pa.array(risk, pa.float64(), mask=risk_mask),
            "note": pa.array(notes, pa.string()),
        }
    )


def days(start: dt.date, count: int) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range(count)]
