"""The deterministic fraud world: transactions, chargebacks arriving later, daily account features.

Everything derives from ``(seed, day, stream)`` through
:mod:`dsv_platform.examples.fraud.sample_data` style generators; nothing reads the wall
clock. A :class:`FraudDomain` is cheap to build and caches per-day tables.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.examples.fraud import sample_data
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, CHARGEBACKS, TRANSACTIONS

START = dt.date(2026, 6, 1)
MAX_CHARGEBACK_DELAY_DAYS = 120
MAX_REPORT_LAG_DAYS = 3
FEATURE_WINDOW_DAYS = 7
FEATURE_VERSION = 1
REASONS = np.array(["fraud_card_absent", "fraud_card_present", "not_received", "duplicate"])
STATUSES = np.array(["confirmed", "disputed", "reversed"])


def _rng(seed: int, day: dt.date, stream: str) -> np.random.Generator:
    material = hashlib.sha256(f"{seed}:{day.isoformat()}:{stream}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(material[:16], "big")))


def _midnight_us(day: dt.date) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp()) * 1_000_000


@lru_cache(maxsize=512)
def _transactions(seed: int, rows: int, start: dt.date, day: dt.date) -> pa.Table:
    return sample_data.transactions_for_day(day, seed=seed, rows=rows, start=start)


@lru_cache(maxsize=512)
def _chargebacks_of(seed: int, rows: int, start: dt.date, day: dt.date) -> pa.Table:
    """Every chargeback that will ever be filed against the transactions of ``day``."""
    tx = _transactions(seed, rows, start, day)
    rng = _rng(seed, day, "chargebacks")
    n = tx.num_rows
    risk = np.nan_to_num(tx.column("merchant_risk").to_numpy(zero_copy_only=False).astype(float), nan=0.1)
    card_present = tx.column("card_present").to_numpy(zero_copy_only=False)
    p = 0.01 + 0.25 * risk + np.where(card_present, 0.0, 0.02)
    hit = rng.random(n) < p
    delay = rng.integers(1, MAX_CHARGEBACK_DELAY_DAYS + 1, n)
    lag = rng.integers(0, MAX_REPORT_LAG_DAYS + 1, n)
    seconds = rng.integers(0, 86_400, n)
    reasons = np.where(card_present, 1, rng.choice([0, 2, 3], n, p=[0.8, 0.15, 0.05]))
    status = rng.choice(3, n, p=[0.85, 0.1, 0.05])
    idx = np.flatnonzero(hit)
    ids = tx.column("transaction_id").to_numpy()[idx]
    charged = _midnight_us(day) + (delay[idx] * 86_400 + seconds[idx]) * 1_000_000
    reported = [day + dt.timedelta(days=int(d + g)) for d, g in zip(delay[idx], lag[idx], strict=True)]
    table = pa.table(
        {
            "chargeback_id": pa.array([f"cb_{i}" for i in ids], pa.string()),
            "transaction_id": pa.array(ids, pa.int64()),
            "account_id": tx.column("account_id").take(pa.array(idx)),
            "amount": pc.abs(tx.column("amount").take(pa.array(idx))),
            "reason_code": pa.array(REASONS[reasons[idx]], pa.string()),
            "status": pa.array(STATUSES[status[idx]], pa.string()),
            "charged_back_at": pa.array(charged, pa.timestamp("us", tz="UTC")),
            "reported_date": pa.array(reported, pa.date32()),
        }
    )
    return table.cast(CHARGEBACKS.contract.arrow_schema)


@dataclass(frozen=True)
class FraudDomain:
    """The sample fraud world for one seed. ``rows_per_day`` is transactions per day."""

    seed: int = 7
    rows_per_day: int = sample_data.ROWS_PER_DAY
    start: dt.date = START

    def days(self, count: int) -> list[dt.date]:
        return sample_data.days(self.start, count)

    def transactions(self, day: dt.date) -> pa.Table:
        """The transactions of ``day`` as the payments source sends them (ids unique across days)."""
        self._check_day(day)
        return _transactions(self.seed, self.rows_per_day, self.start, day)

    def chargebacks_filed_for(self, day: dt.date) -> pa.Table:
        """All chargebacks that will ever be filed against ``day``'s transactions (ground truth)."""
        self._check_day(day)
        return _chargebacks_of(self.seed, self.rows_per_day, self.start, day)

    def chargebacks(self, reported: dt.date) -> pa.Table:
        """The chargebacks the network reports on ``reported`` (for transactions days to weeks earlier)."""
        self._check_day(reported)
        first = max(self.start, reported - dt.timedelta(days=MAX_CHARGEBACK_DELAY_DAYS + MAX_REPORT_LAG_DAYS))
        parts = []
        for offset in range((reported - first).days):
            filed = self.chargebacks_filed_for(first + dt.timedelta(days=offset))
            parts.append(filed.filter(pc.equal(filed.column("reported_date"), pa.scalar(reported, pa.date32()))))
        if not parts:
            return CHARGEBACKS.contract.arrow_schema.empty_table()
        return pa.concat_tables(parts).sort_by("chargeback_id")

    def account_features(self, day: dt.date, *, amount_unit_bug: bool = False, version: int = FEATURE_VERSION) -> pa.Table:
        """Per-account features of ``day`` over the trailing 7 days of transactions.

        ``amount_unit_bug`` reproduces a known defect: ``amount_sum_7d`` computed
        in cents instead of dollars (100x too large).
        """
        self._check_day(day)
        first = max(self.start, day - dt.timedelta(days=FEATURE_WINDOW_DAYS - 1))
        window = pa.concat_tables([self.transactions(first + dt.timedelta(days=i)) for i in range((day - first).days + 1)])
        window = window.append_column("present", pc.cast(window.column("card_present"), pa.float64()))
        agg = window.group_by("account_id").aggregate([("transaction_id", "count"), ("amount", "sum"), ("present", "mean")])
        amount = pc.cast(agg.column("amount_sum"), pa.decimal128(18, 2))
        if amount_unit_bug:
            amount = pc.cast(pc.multiply(amount, pa.scalar(100, pa.decimal128(5, 0))), pa.decimal128(18, 2))
        table = pa.table(
            {
                "account_id": agg.column("account_id"),
                "feature_date": pa.array([day] * agg.num_rows, pa.date32()),
                "txn_count_7d": pc.cast(agg.column("transaction_id_count"), pa.int32()),
                "amount_sum_7d": amount,
                "card_present_ratio_7d": pc.round(agg.column("present_mean"), 4),
                "feature_version": pa.array([version] * agg.num_rows, pa.int32()),
            }
        )
        return table.cast(ACCOUNT_FEATURES.contract.arrow_schema).sort_by("account_id")

    def table(self, source: str, day: dt.date) -> pa.Table:
        """The regular daily batch of a source as a table."""
        if source == TRANSACTIONS.name:
            return self.transactions(day)
        if source == CHARGEBACKS.name:
            return self.chargebacks(day)
        if source == ACCOUNT_FEATURES.name:
            return self.account_features(day)
        raise KeyError(f"unknown source {source!r}; known: transactions, chargebacks, account_features")

    def _check_day(self, day: dt.date) -> None:
        if day < self.start:
            raise ValueError(f"day {day} is before the domain's first day {self.start}")
