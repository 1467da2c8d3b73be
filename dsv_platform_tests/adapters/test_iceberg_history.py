"""Which snapshots of a history hold a subject (privacy deletion): the same answer as a scan of every snapshot, each file read once.

Days appended one snapshot each, a late batch, then a row-level delete (copy-on-write: files rewritten): for accounts
present in one day, in several, in none and deleted, :meth:`CanonicalTables.snapshots_matching` equals pyiceberg's
own scan of each snapshot, and reads each manifest file once however many snapshots list it.
"""

from __future__ import annotations

import collections
import datetime as dt

import pyarrow.compute as pc
from pyiceberg.manifest import ManifestFile

from dsv_platform.adapters.iceberg.iceberg_schema import where
from dsv_platform.adapters.iceberg.iceberg_values import BATCH
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.adapters.test_iceberg import tables

DOMAIN = FraudDomain(rows_per_day=60)

__all__ = ["tables"]  # the canonical tables on a SQLite and a PostgreSQL catalog, as test_iceberg builds them


def _scanned(tables, key) -> list[int]:
    tbl = tables.load(TRANSACTIONS.name)
    f = where(("account_id", key))
    return [s.snapshot_id for s in tbl.snapshots() if tbl.scan(row_filter=f, snapshot_id=s.snapshot_id, limit=1).to_arrow().num_rows]


def test_snapshots_holding_a_key_equal_a_scan_of_each_snapshot_and_read_each_manifest_once(tables, monkeypatch):
    days = []
    for offset in range(5):
        batch = events.daily_batch(DOMAIN, "transactions", DOMAIN.start + dt.timedelta(days=offset))
        rows = prepare_batch(batch.data, TRANSACTIONS).accepted
        tables.append(TRANSACTIONS, rows, recorded_at=batch.recorded_at, batch=batch.batch_id)
        days.append(set(rows.column("account_id").to_pylist()))
    late = events.late_transactions(DOMAIN, DOMAIN.start, arrived=DOMAIN.start + dt.timedelta(days=9), count=5)
    late_rows = prepare_batch(late.data, TRANSACTIONS).accepted
    tables.append(TRANSACTIONS, late_rows, recorded_at=late.recorded_at, batch=late.batch_id)
    deleted = late_rows.column("account_id")[0].as_py()
    tables.delete_rows(TRANSACTIONS, ("account_id", deleted))

    once = sorted(days[0] - set().union(*days[1:]))[0]
    several = sorted(days[0] & days[4])[0]
    cases = {"one day": once, "several days": several, "deleted": deleted, "absent": "acct_nobody"}
    expected = {name: _scanned(tables, key) for name, key in cases.items()}
    snapshots = tables.load(TRANSACTIONS.name).snapshots()
    assert len(snapshots) == 7
    assert len(expected["one day"]) == 7 and expected["absent"] == []
    assert 0 < len(expected["deleted"]) < 7  # the snapshots before the delete still hold it, the delete's own does not

    reads: collections.Counter[str] = collections.Counter()
    fetch = ManifestFile.fetch_manifest_entry

    def counted(self, io, discard_deleted=True):
        reads[self.manifest_path] += 1
        return fetch(self, io, discard_deleted=discard_deleted)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counted)
    for name, key in cases.items():
        reads.clear()
        assert tables.snapshots_matching(TRANSACTIONS, ("account_id", key)) == expected[name], name
        assert reads and max(reads.values()) == 1, (name, reads)
    assert pc.sum(pc.equal(tables.read(TRANSACTIONS).column("account_id"), deleted)).as_py() == 0  # the delete took every row of it
    assert tables.snapshots_matching(TRANSACTIONS, (BATCH, late.batch_id)) == _batch_scanned(tables, late.batch_id)


def _batch_scanned(tables, batch_id) -> list[int]:
    tbl = tables.load(TRANSACTIONS.name)
    f = where((BATCH, batch_id))
    return [s.snapshot_id for s in tbl.snapshots() if tbl.scan(row_filter=f, snapshot_id=s.snapshot_id, limit=1).to_arrow().num_rows]
