import dataclasses
import datetime as dt
import threading

import pyarrow.compute as pc
import pytest

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.bootstrap import build_tables
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=200)
DAY = DOMAIN.start + dt.timedelta(days=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def tables(request, tmp_path):
    settings = settings_at(tmp_path)
    if request.param == "postgres":
        settings = dataclasses.replace(settings, iceberg_catalog_url=request.getfixturevalue("postgres_url"))
    return build_tables(settings)


def _append(tables, batch, spec=TRANSACTIONS, name=None):
    rows = prepare_batch(batch.data, spec).accepted
    return tables.append(spec, rows, recorded_at=batch.recorded_at, batch=name or batch.batch_id)


def test_append_is_idempotent_and_partitioned(tables):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    first = _append(tables, batch)
    assert first.appended == 200 and first.snapshot_id is not None
    again = _append(tables, batch)
    assert again.already_applied and again.snapshot_id == first.snapshot_id
    same_rows = _append(tables, batch, name="resent")
    assert same_rows.appended == 0 and same_rows.unchanged == 200
    assert [f.name for f in tables.table(TRANSACTIONS).spec().fields] == ["event_date"]
    assert tables.read(TRANSACTIONS, partition=DAY).num_rows == 200


def test_late_events_are_new_rows_readable_as_known_at_t(tables):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    _append(tables, batch)
    pinned = tables.current_snapshot_id(TRANSACTIONS)
    late = events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=6), count=7)
    assert _append(tables, late).appended == 7
    assert tables.read(TRANSACTIONS, partition=DAY).num_rows == 207
    assert tables.read(TRANSACTIONS, partition=DAY, as_of=batch.recorded_at).num_rows == 200
    assert tables.read(TRANSACTIONS, partition=DAY, snapshot_id=pinned).num_rows == 200
    assert tables.read(TRANSACTIONS, partition=DAY + dt.timedelta(days=1)).num_rows == 0


def test_corrections_append_and_latest_version_wins(tables):
    buggy = events.buggy_feature_batch(DOMAIN, DAY)
    _append(tables, buggy, ACCOUNT_FEATURES)
    [fix] = events.feature_backfill(DOMAIN, DAY, DAY, recorded_on=DAY + dt.timedelta(days=10))
    outcome = _append(tables, fix, ACCOUNT_FEATURES)
    n = outcome.appended
    assert n > 0
    history = tables.read(ACCOUNT_FEATURES, history=True)
    assert history.num_rows == 2 * n  # nothing rewritten
    now = tables.read(ACCOUNT_FEATURES, partition=DAY)
    then = tables.read(ACCOUNT_FEATURES, partition=DAY, as_of=buggy.recorded_at)
    assert set(now.column("feature_version").to_pylist()) == {2}
    assert set(then.column("feature_version").to_pylist()) == {1}
    assert pc.sum(then.column("amount_sum_7d")).as_py() == 100 * pc.sum(now.column("amount_sum_7d")).as_py()


def test_pin_tags_a_snapshot_and_it_stays_readable(tables):
    _append(tables, events.daily_batch(DOMAIN, "transactions", DAY))
    pin = tables.pin(TRANSACTIONS, "fraud_training_set-v6-abc123")
    _append(tables, events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=3)))
    assert tables.pin(TRANSACTIONS, "fraud_training_set-v6-abc123", snapshot_id=pin.snapshot_id) == pin
    with pytest.raises(CanonicalTableError, match="already pins"):
        tables.pin(TRANSACTIONS, "fraud_training_set-v6-abc123")
    assert tables.tags(TRANSACTIONS) == {"fraud_training_set-v6-abc123": pin.snapshot_id}
    snaps = tables.snapshots(TRANSACTIONS)
    assert len(snaps) == 2 and snaps[0].tags == ("fraud_training_set-v6-abc123",)
    assert tables.read(TRANSACTIONS, snapshot_id=pin.snapshot_id).num_rows == 200
    with pytest.raises(CanonicalTableError, match="no snapshot"):
        tables.read(TRANSACTIONS, snapshot_id=12345)


def test_concurrent_appends_retry_and_all_land(tables):
    days = DOMAIN.days(4)
    tables.table(TRANSACTIONS)
    errors = []

    def work(day):
        try:
            catalog = tables.catalog.__class__(tables.catalog.name, **tables.catalog.properties)
            _append(CanonicalTables(catalog), events.daily_batch(DOMAIN, "transactions", day))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(d,)) for d in days]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert tables.read(TRANSACTIONS).num_rows == 800


def test_a_batch_appended_in_several_record_batches_keeps_every_row_in_its_own_file(tables):
    """Each chunk of a streamed append is its own data file: a shared file number made every chunk overwrite the last."""
    days = [DAY, DAY + dt.timedelta(days=1)]
    rows = {d: prepare_batch(events.daily_batch(DOMAIN, "transactions", d).data, TRANSACTIONS).accepted for d in days}

    def chunks():
        for start in (0, 70, 140):  # three record batches per day, the last one shorter
            for d in days:
                yield d, rows[d].slice(start, 70)

    recorded = events.daily_batch(DOMAIN, "transactions", DAY).recorded_at
    outcomes = tables.append_days(TRANSACTIONS, chunks, recorded_at=recorded, batch="streamed", row_filter=tables.partition_filter(TRANSACTIONS, days))
    assert {d: o.appended for d, o in outcomes.items()} == dict.fromkeys(days, 200)
    for d in days:
        read = tables.read(TRANSACTIONS, partition=d)
        assert read.num_rows == 200 and pc.count_distinct(read.column("transaction_id")).as_py() == 200
        assert sorted(read.column("transaction_id").to_pylist()) == sorted(rows[d].column("transaction_id").to_pylist())
    files = [t.file for t in tables.table(TRANSACTIONS).scan().plan_files()]
    assert len({f.file_path for f in files}) == len(files) == 6
    assert sum(f.record_count for f in files) == 400


def test_a_partitions_streamed_digest_is_its_whole_digest_with_corrections_and_several_files(tables, tmp_path):
    """Issue 22: a day's digest after a load runs in a scratch engine with a small pool, and equals hashing the day read whole,
    with corrections (later versions of the same keys win), a batch in several data files, and an empty day."""
    from dsv_platform.adapters.engine.duckdb_engine import EngineLimits
    from dsv_platform.core.identity.hashing import hash_table
    from dsv_platform.services.ingest.partition_digest import partition_digest, streamable

    limits = EngineLimits(memory=64 << 20, threads=2, spill_root=tmp_path / "spill")
    buggy = events.buggy_feature_batch(DOMAIN, DAY)
    _append(tables, buggy, ACCOUNT_FEATURES)
    [fix] = events.feature_backfill(DOMAIN, DAY, DAY, recorded_on=DAY + dt.timedelta(days=10))
    _append(tables, fix, ACCOUNT_FEATURES)
    rows = prepare_batch(events.daily_batch(DOMAIN, "transactions", DAY).data, TRANSACTIONS).accepted
    tables.append_days(TRANSACTIONS, lambda: [(DAY, rows.slice(0, 70)), (DAY, rows.slice(70))], recorded_at=buggy.recorded_at, batch="two-files",
                       row_filter=tables.partition_filter(TRANSACTIONS, [DAY]))  # fmt: skip
    for spec in (ACCOUNT_FEATURES, TRANSACTIONS):
        assert streamable(spec, limits)
        whole = hash_table(tables.read(spec, partition=DAY), spec.contract, partition_by=spec.contract.partition_by)
        assert partition_digest(tables, spec, DAY, limits) == whole  # the engine reads the local data files itself
        assert partition_digest(tables, spec, DAY, limits, read_files=False) == whole  # the rows stream in (an S3 warehouse)
        assert partition_digest(tables, spec, DAY, None) == whole  # the in-memory path (DSV_BUILD_ENGINE=arrow)
        assert whole.rows > 0 and whole.partitions[0].key.endswith(f"={DAY}")
    empty_day = DAY + dt.timedelta(days=40)
    nothing = hash_table(tables.read(TRANSACTIONS, partition=empty_day), TRANSACTIONS.contract, partition_by="event_date")
    assert partition_digest(tables, TRANSACTIONS, empty_day, limits) == nothing
    assert not list((tmp_path / "spill").glob("build-*"))  # every scratch engine removed
