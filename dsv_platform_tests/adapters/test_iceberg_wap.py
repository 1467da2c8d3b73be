"""Staging branches of canonical tables (iceberg_wap.py) on the SQLite and PostgreSQL catalogs: an append to a branch leaves
main alone, the fast-forward is a compare-and-swap on main, and a table without a snapshot can be staged too."""

import datetime as dt

from dsv_platform.adapters.iceberg import iceberg_wap as wap
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.adapters.test_iceberg import DAY, DOMAIN, tables

__all__ = ["tables"]
NEXT = DAY + dt.timedelta(days=1)


def _to(tables, day, branch=None, name=None):
    batch = events.daily_batch(DOMAIN, "transactions", day)
    rows = prepare_batch(batch.data, TRANSACTIONS).accepted
    chunks = lambda: [(day, rows)]  # noqa: E731
    filter_ = tables.partition_filter(TRANSACTIONS, [day])
    return tables.append_days(TRANSACTIONS, chunks, recorded_at=batch.recorded_at, batch=name or batch.batch_id, row_filter=filter_, branch=branch)[day]


def test_an_append_to_a_branch_leaves_main_and_publish_fast_forwards_it(tables):
    main = _to(tables, DAY).snapshot_id
    assert wap.stage(tables, TRANSACTIONS, "wap-a") == main
    staged = _to(tables, NEXT, "wap-a")
    assert staged.appended == 200 and staged.snapshot_id != main and tables.current_snapshot_id(TRANSACTIONS) == main
    assert tables.read(TRANSACTIONS, partition=NEXT).num_rows == 0
    assert tables.read(TRANSACTIONS, partition=NEXT, snapshot_id=staged.snapshot_id).num_rows == 200
    assert _to(tables, NEXT, "wap-a").already_applied  # idempotent on the branch: its head is what the append reads
    assert wap.publish(tables, TRANSACTIONS, "wap-a", staged.snapshot_id, [staged.snapshot_id])
    assert tables.current_snapshot_id(TRANSACTIONS) == staged.snapshot_id and "wap-a" not in tables.table(TRANSACTIONS).refs()


def test_publish_refuses_when_main_moved_and_the_branch_stays(tables):
    _to(tables, DAY)
    wap.stage(tables, TRANSACTIONS, "wap-b")
    staged = _to(tables, NEXT, "wap-b").snapshot_id
    moved = _to(tables, DAY, name="concurrent").snapshot_id  # another writer, straight to main
    assert not wap.publish(tables, TRANSACTIONS, "wap-b", staged, [staged])
    assert tables.current_snapshot_id(TRANSACTIONS) == moved and wap.branch_head(tables, TRANSACTIONS, "wap-b") == staged
    assert wap.stage(tables, TRANSACTIONS, "wap-b") == moved  # staged again: the branch starts from the new main
    again = _to(tables, NEXT, "wap-b").snapshot_id
    assert wap.publish(tables, TRANSACTIONS, "wap-b", again, [again]) and moved in wap.ancestry(tables.table(TRANSACTIONS), again)


def test_a_table_without_a_snapshot_is_staged_by_its_first_append(tables):
    assert wap.stage(tables, TRANSACTIONS, "wap-c") is None
    staged = _to(tables, DAY, "wap-c").snapshot_id
    assert tables.current_snapshot_id(TRANSACTIONS) is None and wap.branch_head(tables, TRANSACTIONS, "wap-c") == staged
    assert [b.name for b in wap.staging_branches(tables)] == ["wap-c"]
    assert wap.publish(tables, TRANSACTIONS, "wap-c", staged, [staged]) and tables.current_snapshot_id(TRANSACTIONS) == staged
    assert tables.snapshot_parent(TRANSACTIONS, staged) is None and wap.staging_branches(tables) == []
