"""Issue 22: the digest of a commit's data files reads only the manifests the new commits wrote, on a real catalog.

``live_files(..., added_by=...)`` must list exactly the live files those snapshots added, whatever the table's
history before them (seal_written hashes them after each append; a whole-table listing per commit was quadratic).
"""

from __future__ import annotations

import datetime as dt

from dsv_platform.adapters.iceberg.iceberg_files import live_files
from dsv_platform.bootstrap import build_tables
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=50)


def test_the_files_of_new_commits_come_from_their_manifests_alone(tmp_path):
    tables = build_tables(settings_at(tmp_path))
    made = []
    for i in range(3):
        batch = events.daily_batch(DOMAIN, "transactions", DOMAIN.start + dt.timedelta(days=i))
        tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=batch.batch_id)
        made.append(tables.current_snapshot_id(TRANSACTIONS))
    tbl = tables.table(TRANSACTIONS)
    every = live_files(tbl, None)
    assert {f.snapshot_id for f in every} == set(made)
    for k in range(len(made)):
        since = set(made[k:])
        assert live_files(tbl, None, added_by=since) == [f for f in every if f.snapshot_id in since]
    assert live_files(tbl, None, added_by=set()) == []
