import datetime as dt

import pyarrow.compute as pc
import pytest

from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.ingest.batch import PreparedBatch, batch_file_name, parse_batch_file_name, prepare_table
from dsv_platform.core.ingest.landing_format import read_csv_text
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.labels import LABEL_DEFINITIONS, compute_labels
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, CHARGEBACKS, TRANSACTIONS

DOMAIN = FraudDomain(rows_per_day=200)


def prepare_batch(data, contract, aliases=None) -> PreparedBatch:
    """A CSV batch parsed against ``contract`` (through ``aliases``)."""
    return prepare_table(read_csv_text(data, contract, aliases), contract)
DAY = DOMAIN.start + dt.timedelta(days=2)


def _hash(table, spec):
    return hash_table(table, spec.contract).content_hash


@pytest.mark.parametrize("spec", [TRANSACTIONS, CHARGEBACKS, ACCOUNT_FEATURES], ids=lambda s: s.name)
def test_daily_batch_is_deterministic_and_round_trips(spec):
    day = DOMAIN.start + dt.timedelta(days=40)
    one, two = daily_batch(DOMAIN, spec.name, day), daily_batch(FraudDomain(rows_per_day=200), spec.name, day)
    assert one == two
    prepared = prepare_batch(one.data, spec.contract, spec.aliases)
    assert prepared.report.passed and not prepared.malformed
    assert _hash(prepared.accepted, spec) == _hash(DOMAIN.table(spec.name, day), spec)


def test_seed_changes_the_data():
    assert _hash(FraudDomain(seed=8, rows_per_day=200).transactions(DAY), TRANSACTIONS) != _hash(DOMAIN.transactions(DAY), TRANSACTIONS)


def test_chargebacks_arrive_days_to_weeks_after_their_transaction():
    filed = DOMAIN.chargebacks_filed_for(DAY)
    assert filed.num_rows > 0
    reported = filed.column("reported_date").to_pylist()
    assert min(reported) > DAY and max(reported) > DAY + dt.timedelta(days=30)
    some = reported[0]
    assert filed.column("chargeback_id")[0].as_py() in DOMAIN.chargebacks(some).column("chargeback_id").to_pylist()


def test_label_v6_window_is_wider_than_v5():
    tx = DOMAIN.transactions(DAY)
    cb = DOMAIN.chargebacks_filed_for(DAY)
    v5, v6 = (compute_labels(tx, cb, LABEL_DEFINITIONS[v]) for v in (5, 6))
    assert v5.num_rows == v6.num_rows == tx.num_rows
    p5, p6 = (pc.sum(t.column("is_fraud")).as_py() for t in (v5, v6))
    assert 0 < p5 < p6
    days = v6.filter(v6.column("is_fraud")).column("days_to_chargeback").to_pylist()
    assert max(days) <= 90 and any(d > 60 for d in days)


def test_late_transactions_belong_to_the_old_day_with_new_ids():
    late = events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=9), count=5)
    rows = prepare_batch(late.data, TRANSACTIONS.contract).accepted
    assert rows.num_rows == 5 and set(rows.column("event_date").to_pylist()) == {DAY}
    assert not set(rows.column("transaction_id").to_pylist()) & set(DOMAIN.transactions(DAY).column("transaction_id").to_pylist())
    assert late.recorded_at.date() == DAY + dt.timedelta(days=10)


def test_feature_backfill_corrects_the_buggy_amounts():
    buggy = prepare_batch(events.buggy_feature_batch(DOMAIN, DAY).data, ACCOUNT_FEATURES.contract).accepted
    fixed = events.feature_backfill(DOMAIN, DAY, DAY + dt.timedelta(days=2), recorded_on=DAY + dt.timedelta(days=20))
    assert len(fixed) == 3 and {b.batch_id for b in fixed} == {f"backfill-{DAY + dt.timedelta(days=20)}"}
    good = prepare_batch(fixed[0].data, ACCOUNT_FEATURES.contract).accepted
    assert pc.sum(buggy.column("amount_sum_7d")).as_py() == 100 * pc.sum(good.column("amount_sum_7d")).as_py()
    assert set(good.column("feature_version").to_pylist()) == {2}


def test_renamed_column_reads_through_the_compatibility_view():
    batch = events.renamed_column_batch(DOMAIN, DAY)
    assert b"merchant_risk_score" in batch.data.splitlines()[0]
    through_view = prepare_batch(batch.data, TRANSACTIONS.contract, TRANSACTIONS.aliases)
    assert _hash(through_view.accepted, TRANSACTIONS) == _hash(DOMAIN.transactions(DAY), TRANSACTIONS)
    without = prepare_batch(batch.data, TRANSACTIONS.contract)
    assert without.malformed and "merchant_risk" in without.malformed_reason


def test_malformed_rows_are_rejected_with_failure_cases_and_the_rest_kept():
    prepared = prepare_batch(events.malformed_batch(DOMAIN, DAY).data, TRANSACTIONS.contract)
    assert prepared.accepted.num_rows == 195 and prepared.rejected.num_rows == 5
    checks = {(f.column, f.check.split("(")[0]) for f in prepared.report.failures}
    assert {("amount", "parse"), ("amount", "in_range"), ("currency", "isin"), ("transaction_id", "field_uniqueness")} <= checks
    assert all(f.row_key is not None for f in prepared.report.failures)


def test_garbled_batch_is_malformed_as_a_whole():
    prepared = prepare_batch(events.garbled_batch(DAY).data, TRANSACTIONS.contract)
    assert prepared.malformed and prepared.accepted.num_rows == 0


def test_batch_file_names_round_trip():
    name = batch_file_name("transactions", DAY, "late-2026-06-20")
    assert parse_batch_file_name(name) == ("transactions", DAY, "late-2026-06-20")
    assert parse_batch_file_name("notes.csv") is None
    assert parse_batch_file_name("transactions__2026-13-01__x.csv") is None
