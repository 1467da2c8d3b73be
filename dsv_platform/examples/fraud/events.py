"""Injectors for the real-world events the platform must survive, all deterministic from the seed.

Each returns what a source would send (:class:`RawBatch` values) or, for the
label change, the pair of definitions; none reads the wall clock. Arrival times
are explicit, so "as known at T" reads are reproducible.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from dsv_platform.core.ingest.batch import RawBatch, arrival_time, batch_of
from dsv_platform.core.ingest.landing_format import encode_csv
from dsv_platform.examples.fraud.generator import FraudDomain, _rng
from dsv_platform.examples.fraud.labels import LabelDefinition, label_definition
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, TRANSACTIONS

LATE_ID_OFFSET = 5_000_000


def daily_batch(domain: FraudDomain, source: str, day: dt.date) -> RawBatch:
    """The regular batch of ``source`` about ``day``, arriving the next morning."""
    return batch_of(domain.table(source, day), source=source, day=day, batch_id="daily", recorded_at=arrival_time(day))


def late_transactions(domain: FraudDomain, day: dt.date, *, arrived: dt.date, count: int = 10) -> RawBatch:
    """Transactions of an old ``day`` that the source only sends on ``arrived`` (new ids, same day)."""
    if arrived <= day:
        raise ValueError(f"late events must arrive after their day: {arrived} <= {day}")
    late = domain.transactions(day).slice(0, count)
    rng = _rng(domain.seed, day, f"late:{arrived.isoformat()}")
    ids = late.column("transaction_id").to_numpy() + LATE_ID_OFFSET
    late = late.set_column(0, "transaction_id", pa.array(ids, pa.int64()))
    accounts = [f"acct_{a:05d}" for a in rng.integers(0, 5_000, count)]
    late = late.set_column(1, "account_id", pa.array(accounts, pa.string()))
    return batch_of(late, source=TRANSACTIONS.name, day=day, batch_id=f"late-{arrived.isoformat()}", recorded_at=arrival_time(arrived))


def buggy_feature_batch(domain: FraudDomain, day: dt.date) -> RawBatch:
    """The feature batch of ``day`` as the buggy job produced it (``amount_sum_7d`` in cents)."""
    table = domain.account_features(day, amount_unit_bug=True)
    return batch_of(table, source=ACCOUNT_FEATURES.name, day=day, batch_id="daily", recorded_at=arrival_time(day, hour=3))


def feature_backfill(domain: FraudDomain, first: dt.date, last: dt.date, *, recorded_on: dt.date) -> list[RawBatch]:
    """Corrected feature batches (``feature_version`` 2) for ``first..last``, all recorded on ``recorded_on``."""
    if last < first:
        raise ValueError(f"empty backfill range {first}..{last}")
    out = []
    for i in range((last - first).days + 1):
        day = first + dt.timedelta(days=i)
        table = domain.account_features(day, version=2)
        batch_id = f"backfill-{recorded_on.isoformat()}"
        out.append(batch_of(table, source=ACCOUNT_FEATURES.name, day=day, batch_id=batch_id, recorded_at=arrival_time(recorded_on, hour=4)))
    return out


def label_definition_change(old: int = 5, new: int = 6) -> tuple[LabelDefinition, LabelDefinition]:
    """The label definition moving from ``old`` to ``new``; the new version is applied to all history."""
    return label_definition(old), label_definition(new)


def renamed_column_batch(domain: FraudDomain, day: dt.date, *, old: str = "merchant_risk", new: str = "merchant_risk_score") -> RawBatch:
    """``day``'s transactions after the source renamed ``old`` to ``new`` (read through the compatibility view)."""
    table = domain.transactions(day)
    table = table.rename_columns([new if n == old else n for n in table.column_names])
    return batch_of(table, source=TRANSACTIONS.name, day=day, batch_id="daily", recorded_at=arrival_time(day))


def malformed_batch(domain: FraudDomain, day: dt.date, *, bad_rows: int = 4) -> RawBatch:
    """``day``'s transactions with a few broken rows: an unparseable amount, an unknown currency,
    an out-of-range amount, a conflicting duplicate key. The other rows are fine."""
    table = domain.transactions(day)
    cols = {n: table.column(n).to_pylist() for n in table.column_names}
    text = {n: [None if v is None else _cell(v) for v in vals] for n, vals in cols.items()}
    rng = np.random.Generator(np.random.PCG64(domain.seed))
    rows = sorted(rng.choice(table.num_rows - 1, size=min(bad_rows, 4), replace=False).tolist())
    edits = [("amount", "12,34.x"), ("currency", "XXX"), ("amount", "99999999.00"), ("transaction_id", None)]
    for row, (column, value) in zip(rows, edits, strict=False):
        if column == "transaction_id":
            text[column][row] = text[column][row + 1]  # same key as the next row, other values
        else:
            text[column][row] = value
    return RawBatch(TRANSACTIONS.name, day, "daily", arrival_time(day), encode_csv(pa.table({n: pa.array(v, pa.string()) for n, v in text.items()})))


def garbled_batch(day: dt.date, *, source: str = TRANSACTIONS.name) -> RawBatch:
    """A batch that is not the source's format at all (truncated header, binary junk): quarantined whole."""
    return RawBatch(source, day, "daily", arrival_time(day), b"\x00\x01transaction_id;acc\xff\xfe\n\x02garbage")


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%fZ")
    return str(value)
