"""The raw-agreement comparison (issue 24 item 8 c): canonical rows of one batch against the batch's rows derived from raw.

Real fraud rows; the canonical side is what a load keeps (some keys skipped as unchanged), or an insider's edit of it.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.contracts.integrity_signals import IntegrityPolicy, parse_integrity, raw_agreement
from dsv_platform.core.identity.raw_agreement import BatchAgreement, compare_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES

CONTRACT = SOURCES["transactions"].contract
DAY = dt.date(2026, 6, 1)


@pytest.fixture
def raw() -> pa.Table:
    return FraudDomain(rows_per_day=200).transactions(DAY).select(list(CONTRACT.column_names)).cast(CONTRACT.arrow_schema)


def chunks(rows: pa.Table, size: int = 64) -> list[pa.Table]:
    return [rows.slice(i, size) for i in range(0, rows.num_rows, size)]


@pytest.mark.parametrize("size", [1, 7, 64, 10_000])  # raw chunks gathered into groups of a quarter of the kept rows, or one
def test_the_rows_a_load_kept_agree_in_any_order_and_chunking(raw: pa.Table, size: int) -> None:
    kept = raw.take(pa.array(list(range(raw.num_rows - 1, 40, -2))))  # every other key (the rest skipped as unchanged), reversed
    result = compare_batch("transactions", "daily@aa", CONTRACT, kept, chunks(raw, size))
    assert result.agrees and result.canonical_rows == result.raw_rows == kept.num_rows and result.canonical_hash == result.raw_hash
    assert compare_batch("transactions", "daily@aa", CONTRACT, raw.slice(0, 0), chunks(raw)).agrees


def test_prices_times_100_name_the_column_and_the_rows_never_a_value(raw: pa.Table) -> None:
    i = raw.schema.get_field_index("amount")
    tampered = raw.set_column(i, raw.schema.field(i), pc.multiply(raw.column(i), 100).cast(raw.schema.field(i).type))
    result = compare_batch("transactions", "daily@aa", CONTRACT, tampered, chunks(raw))
    assert not result.agrees and result.columns == {"amount": raw.num_rows} and result.unmatched == 0
    text = result.describe()
    assert text == f"transactions:daily@aa: {raw.num_rows} canonical rows, {raw.num_rows} raw rows with their keys, amount differs in {raw.num_rows} rows"
    assert str(raw.column("amount")[0].as_py()) not in text


@pytest.mark.parametrize("size", [3, 64])
def test_rows_with_keys_the_raw_batch_never_had_are_counted(raw: pa.Table, size: int) -> None:
    ids = raw.column("transaction_id")
    forged = raw.slice(0, 3).set_column(0, raw.schema.field(0), pc.add(ids.slice(0, 3), 10_000_000))
    result = compare_batch("transactions", "daily@aa", CONTRACT, pa.concat_tables([raw.slice(3), forged]), chunks(raw, size))
    assert not result.agrees and result.unmatched == 3 and result.raw_rows == raw.num_rows - 3 and result.columns == {}


def test_the_gate_lists_batches_and_columns_and_can_be_turned_off() -> None:
    bad = BatchAgreement("transactions", "daily@aa", 10, 10, columns={"amount": 4}, canonical_hash="x", raw_hash="y")
    gate = raw_agreement(IntegrityPolicy(blocking=frozenset({"raw_agreement"})), 3, 30, [bad.describe()], {"transactions.amount"}, [], 0.01)
    assert gate.name == "integrity:raw_agreement" and not gate.passed and gate.blocking and gate.detail["evaluated"] is True
    assert gate.detail["columns"] == "transactions.amount" and "daily@aa" in str(gate.detail["found"])
    off = raw_agreement(parse_integrity({"raw_agreement": False}, file="d.yaml"), 0, 0, [], set(), [], 0.0)
    assert off.passed and off.detail["evaluated"] is False
    with pytest.raises(ConfigError, match=r"integrity\.raw_agreement"):
        parse_integrity({"raw_agreement": "yes"}, file="d.yaml")


def test_a_batch_digest_is_the_partition_hash_of_its_rows(raw: pa.Table) -> None:
    from dsv_platform.core.identity.hashing import hash_partition

    result = compare_batch("transactions", "daily@aa", CONTRACT, raw.take(pa.array(list(range(raw.num_rows))[::-1])), chunks(raw))
    assert result.canonical_hash == result.raw_hash == hash_partition(raw, CONTRACT).hash
