import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pytest

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.ingest.batch import batch_file_name, batch_of, parse_batch_file, parse_batch_file_name, prepare_batch, prepare_table
from dsv_platform.core.ingest.landing_format import encode_batch, read_batch_table, read_csv_text
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.generator import FraudDomain

SOURCES = load_config(CONFIG_DIR, import_labels=False).sources
DOMAIN = FraudDomain(rows_per_day=150)
DAY = DOMAIN.start + dt.timedelta(days=40)
FORMATS = ("csv", "jsonl", "parquet")


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_three_formats_prepare_identical_tables(name):
    table = DOMAIN.table(name, DAY)
    dup = min(3, table.num_rows)
    assert table.num_rows > 1
    table = pa.concat_tables([table, table.slice(0, dup)])  # exact duplicates are dropped in every format
    prepared = {}
    for fmt in FORMATS:
        spec = replace(SOURCES[name], landing_format=fmt)
        prepared[fmt] = prepare_batch(encode_batch(table, fmt), spec)
        assert prepared[fmt].report.passed and not prepared[fmt].malformed and prepared[fmt].duplicates_dropped == dup
    assert prepared["csv"].accepted.equals(prepared["jsonl"].accepted) and prepared["csv"].accepted.equals(prepared["parquet"].accepted)
    assert (
        hash_table(prepared["parquet"].accepted, SOURCES[name].contract).content_hash
        == hash_table(DOMAIN.table(name, DAY), SOURCES[name].contract).content_hash
    )
    contract, aliases = SOURCES[name].contract, SOURCES[name].aliases
    assert prepared["csv"].accepted.equals(prepare_table(read_csv_text(encode_batch(table, "csv"), contract, aliases), contract).accepted)


@pytest.mark.parametrize("fmt", FORMATS)
def test_aliases_bad_cells_and_missing_columns(fmt):
    spec = replace(SOURCES["transactions"], landing_format=fmt)
    table = DOMAIN.transactions(DAY).slice(0, 20)
    renamed = table.rename_columns(["merchant_risk_score" if n == "merchant_risk" else n for n in table.column_names])
    assert prepare_batch(encode_batch(renamed, fmt), spec).accepted.equals(prepare_batch(encode_batch(table, fmt), spec).accepted)
    missing = prepare_batch(encode_batch(table.drop_columns(["currency"]), fmt), spec)
    assert missing.malformed and "currency" in (missing.malformed_reason or "")
    bad = table.set_column(
        table.column_names.index("transaction_id"), "transaction_id", pa.array(["x1", *map(str, table.column("transaction_id").to_pylist()[1:])])
    )
    prepared = prepare_batch(encode_batch(bad, fmt), spec)
    assert prepared.accepted.num_rows == 19 and prepared.rejected.num_rows == 1
    assert any(f.check.startswith("parse") and f.value == "x1" for f in prepared.report.failures)


@pytest.mark.parametrize(
    ("fmt", "data"),
    [("csv", b"\xff\xfe,\n1,2\n"), ("jsonl", b'{"a": 1}\nnot json\n'), ("jsonl", b'{"transaction_id": {"x": 1}}\n'), ("parquet", b"PAR1 not parquet")],
)
def test_unreadable_batches_give_a_reason(fmt, data):
    reason = read_batch_table(data, replace(SOURCES["transactions"], landing_format=fmt))
    assert isinstance(reason, str) and reason


def test_file_names_carry_the_format():
    assert batch_file_name("meters", DAY, "b1", "parquet") == f"meters__{DAY}__b1.parquet"
    assert parse_batch_file(f"meters__{DAY}__b1.jsonl") == ("meters", DAY, "b1", "jsonl")
    assert parse_batch_file_name(f"meters__{DAY}__b1.csv") == ("meters", DAY, "b1")
    assert parse_batch_file_name(f"meters__{DAY}__b1.parquet") is None and parse_batch_file(f"meters__{DAY}__b1.xml") is None
    raw = batch_of(
        DOMAIN.transactions(DAY), source="transactions", day=DAY, batch_id="daily", recorded_at=dt.datetime(2026, 6, 11, tzinfo=dt.UTC), fmt="parquet"
    )
    assert raw.file_name.endswith(".parquet") and raw.format == "parquet"
