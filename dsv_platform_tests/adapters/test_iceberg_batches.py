"""Issue 22 item 3: the batches of canonical snapshots and data files come from Iceberg metadata, not from data files.

On real Iceberg tables (SQLite and PostgreSQL catalogs): GC's inventory and lineage's snapshot batches equal what
reading every data file's ``_batch`` column gives (the answer before the change), on a home with corrections, a
copy-on-write deletion and an expired snapshot; they still answer with every data file's bytes destroyed; a table
written the old way (no ``dsv.batches``, truncated bounds) is answered by reading exactly those files, and an
unreadable one there stops the inventory with a typed error instead of meaning "no batches".
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsv_platform.adapters.iceberg import iceberg_maintenance as ice
from dsv_platform.adapters.iceberg.iceberg_batches import BatchAttributionError, BatchIndex, read_batches
from dsv_platform.adapters.iceberg.iceberg_values import BATCH, BATCHES_PROPERTY, stamped
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES, TRANSACTIONS
from dsv_platform_tests.adapters.test_iceberg import tables

DOMAIN = FraudDomain(rows_per_day=60)
__all__ = ["tables"]  # the canonical tables on a SQLite and a PostgreSQL catalog, as test_iceberg builds them


def _ref(source: str, day: dt.date, name: str) -> str:
    return f"{source}/{day.isoformat()}/{name}-" + "0123456789abcdef" * 4  # as long as a landed batch ref: bounds would truncate it


def _rows(batch, spec=TRANSACTIONS):
    return prepare_batch(batch.data, spec).accepted


def _append(tables, batch, spec=TRANSACTIONS):
    return tables.append(spec, _rows(batch, spec), recorded_at=batch.recorded_at, batch=_ref(spec.name, batch.day, batch.batch_id))


def _old_append(tables, batch, spec=TRANSACTIONS):
    """An append as it was before: no snapshot property, ``_batch`` bounds truncated to 16 characters."""
    tbl = tables.table(spec)
    tbl.transaction().set_properties({f"write.metadata.metrics.column.{BATCH}": "truncate(16)"}).commit_transaction()
    tables.load(spec.name).append(stamped(_rows(batch, spec), batch.recorded_at, _ref(spec.name, batch.day, batch.batch_id)))


def _home(tables, append=_append):
    """Daily batches, a late batch, a correction, a row-level deletion (files rewritten) and an expired first snapshot."""
    for offset in range(3):
        day = DOMAIN.start + dt.timedelta(days=offset)
        append(tables, events.daily_batch(DOMAIN, "transactions", day))
    append(tables, events.late_transactions(DOMAIN, DOMAIN.start, arrived=DOMAIN.start + dt.timedelta(days=9), count=5))
    append(tables, events.buggy_feature_batch(DOMAIN, DOMAIN.start), ACCOUNT_FEATURES)
    [fix] = events.feature_backfill(DOMAIN, DOMAIN.start, DOMAIN.start, recorded_on=DOMAIN.start + dt.timedelta(days=10))
    append(tables, fix, ACCOUNT_FEATURES)
    some = tables.read(TRANSACTIONS).column("account_id")[0].as_py()
    assert tables.delete_rows(TRANSACTIONS, ("account_id", some)).rows
    first = tables.snapshots(TRANSACTIONS)[0].snapshot_id
    assert tables.expire(TRANSACTIONS, [first]) == [first]


def _read_every_file(tables):
    """The answers before the change: every referenced data file's ``_batch`` column, read."""
    files, snaps = {}, {}
    for name in tables.table_names():
        tbl = tables.load(name)
        for snap in tbl.snapshots():
            added = set()
            for manifest in snap.manifests(tbl.io):
                for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                    path = entry.data_file.file_path
                    with tbl.io.new_input(path).open() as fh:
                        files[(name, path)] = tuple(sorted(set(pq.read_table(fh, columns=[BATCH]).column(BATCH).to_pylist())))
                    if manifest.added_snapshot_id == snap.snapshot_id:
                        added.update(files[(name, path)])
            snaps[(name, snap.snapshot_id)] = tuple(sorted(added))
    return files, snaps


def _from_metadata(tables):
    files = {(f.table, f.path): f.batches for f in ice.inventory(tables)[2]}
    return files, {(s.table, s.snapshot_id): s.batches for s in ice.snapshot_batches(tables)}


def _files_read(tables):
    """How many distinct data files the inventory must read (their batches not in the metadata)."""
    n = 0
    for name in tables.table_names():
        tbl = tables.load(name)
        index, seen = BatchIndex(tbl), set()
        for snap in tbl.snapshots():
            for manifest in snap.manifests(tbl.io):
                for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                    if entry.data_file.file_path not in seen:
                        seen.add(entry.data_file.file_path)
                        index.of_entry(entry)
        n += index.files_read
    return n


def _destroy_data_files(tables) -> list[Path]:
    paths = []
    for name in tables.table_names():
        data = ice.local_path(tables.load(name).metadata.location.rstrip("/") + "/data")
        paths += [p for p in data.rglob("*.parquet")]
    for p in paths:
        p.write_bytes(b"not parquet any more")
    return paths


def test_batches_from_metadata_equal_reading_every_data_file(tables):
    _home(tables)
    assert _from_metadata(tables) == _read_every_file(tables)
    assert _files_read(tables) == 0  # every file answered by its bounds or its snapshot's summary
    tbl = tables.load(TRANSACTIONS.name)
    appends = [s for s in tbl.snapshots() if s.summary.operation.value == "append"]
    assert appends and all(len(json.loads(s.summary[BATCHES_PROPERTY])) == 1 for s in appends)


def test_batches_are_answered_with_every_data_file_destroyed(tables):
    _home(tables)
    before = _from_metadata(tables)
    assert any(b for b in before[0].values())
    assert _destroy_data_files(tables)
    with pytest.raises(BatchAttributionError):  # the files really are unreadable
        read_batches(tables.load(TRANSACTIONS.name), next(iter(before[0]))[1])
    assert _from_metadata(tables) == before


def test_a_table_written_the_old_way_reads_exactly_its_unnamed_files(tables):
    _home(tables, append=_old_append)
    tbl = tables.load(TRANSACTIONS.name)
    assert all(s.summary.get(BATCHES_PROPERTY) is None for s in tbl.snapshots())
    assert _from_metadata(tables) == _read_every_file(tables)
    old = _files_read(tables)
    assert old > 0
    _append(tables, events.daily_batch(DOMAIN, "transactions", DOMAIN.start + dt.timedelta(days=5)))  # a new append to the old table
    assert _from_metadata(tables) == _read_every_file(tables)
    assert _files_read(tables) == old  # the new file is named by the metadata
    assert tables.load(TRANSACTIONS.name).properties[f"write.metadata.metrics.column.{BATCH}"] == "full"


def test_an_unreadable_old_file_stops_the_inventory(tables):
    _home(tables, append=_old_append)
    _destroy_data_files(tables)
    with pytest.raises(BatchAttributionError, match=r"data file .*\.parquet"):
        ice.inventory(tables)
    with pytest.raises(BatchAttributionError):
        ice.snapshot_batches(tables)


def test_a_malformed_summary_property_is_an_error_not_no_batches(tables):
    _append(tables, events.daily_batch(DOMAIN, "transactions", DOMAIN.start))
    tbl = tables.load(TRANSACTIONS.name)
    rows = stamped(_rows(events.daily_batch(DOMAIN, "transactions", DOMAIN.start + dt.timedelta(days=1))), dt.datetime.now(dt.UTC), "b" * 40)
    tbl.append(rows, snapshot_properties={BATCHES_PROPERTY: "b" * 40})
    with pytest.raises(BatchAttributionError, match=BATCHES_PROPERTY):
        ice.snapshot_batches(tables)
    assert pc.sum(pc.equal(tables.read(TRANSACTIONS, history=True).column(BATCH), "b" * 40)).as_py() == rows.num_rows
