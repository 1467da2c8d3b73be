"""A pinned snapshot streams every stored row, and refuses (CORRUPT) a data file listed twice or holding other rows than counted."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq
import pytest

from dsv_platform.adapters.iceberg.iceberg_stream import scan_batches
from dsv_platform.bootstrap import build_tables
from dsv_platform.core.errors import CorruptError
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=200)
DAY = DOMAIN.start + dt.timedelta(days=1)


@pytest.fixture
def loaded(tmp_path):
    tables = build_tables(settings_at(tmp_path))
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    outcome = tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=batch.batch_id)
    return tables, outcome.snapshot_id


def test_a_healthy_snapshot_streams_every_row(loaded):
    tables, sid = loaded
    assert scan_batches(tables, TRANSACTIONS, snapshot_id=sid).read_all().num_rows == 200


def test_a_data_file_rewritten_with_fewer_rows_is_corrupt(loaded):
    tables, sid = loaded
    [task] = tables.table(TRANSACTIONS).scan(snapshot_id=sid).plan_files()
    path = task.file.file_path.removeprefix("file://")
    pq.write_table(pq.read_table(path).slice(0, 150), path)
    with pytest.raises(CorruptError, match="holds 150 rows, its manifest counts 200"):
        scan_batches(tables, TRANSACTIONS, snapshot_id=sid).read_all()


def test_a_snapshot_listing_one_file_twice_is_corrupt(loaded):
    tables, _ = loaded
    tbl = tables.table(TRANSACTIONS)
    [task] = tbl.scan().plan_files()
    with tbl.transaction() as txn, txn.update_snapshot().fast_append() as files:
        files.append_data_file(task.file)  # what every streamed chunk after the first did before the fix
    sid = tables.table(TRANSACTIONS).current_snapshot().snapshot_id
    with pytest.raises(CorruptError, match="is listed twice"):
        scan_batches(tables, TRANSACTIONS, snapshot_id=sid).read_all()
