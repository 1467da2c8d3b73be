import datetime as dt
from decimal import Decimal

import pyarrow as pa

from dsv_platform.core.contracts.validation import pandera_schema, split_valid, validate
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, TRANSACTIONS

TX = FraudDomain(rows_per_day=50).transactions(dt.date(2026, 6, 3)).cast(TRANSACTIONS.contract.arrow_schema)


def test_validation_passes_clean_rows():
    report = validate(TX, TRANSACTIONS.contract)
    assert report.passed and report.rows == 50
    assert set(pandera_schema(TRANSACTIONS.contract).columns) == set(TRANSACTIONS.contract.column_names)


def test_validation_reports_failure_cases_as_data():
    rows = TX.to_pylist()
    rows[3]["currency"] = "JPY"
    rows[7]["amount"] = Decimal("-200000.00")
    rows[9]["transaction_id"] = rows[10]["transaction_id"]
    loose = pa.Table.from_pylist(rows, schema=pa.schema([f.with_nullable(True) for f in TX.schema]))
    report = validate(loose, TRANSACTIONS.contract)
    assert not report.passed
    assert report.failed_rows == {3, 7, 9, 10}
    by_row = {f.row_index: f for f in report.failures}
    assert by_row[3].column == "currency" and by_row[3].value == "JPY" and by_row[3].row_key == (rows[3]["transaction_id"],)
    good, bad = split_valid(loose, report)
    assert good.num_rows == 46 and bad.num_rows == 4


def test_missing_column_is_a_table_failure():
    report = validate(TX.drop_columns(["currency"]), TRANSACTIONS.contract)
    assert [f.check for f in report.table_failures] == ["column_in_dataframe"]
    good, bad = split_valid(TX, report)
    assert good.num_rows == 0 and bad.num_rows == 50


def test_composite_key_uniqueness():
    features = FraudDomain(rows_per_day=50).account_features(dt.date(2026, 6, 3))
    doubled = pa.concat_tables([features, features.slice(0, 1)])
    report = validate(doubled, ACCOUNT_FEATURES.contract)
    assert report.failed_rows == {0, features.num_rows}
