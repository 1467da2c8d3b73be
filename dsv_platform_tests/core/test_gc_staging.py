"""GC of write-audit-publish staging branches (issue 26 item 14): a branch a blocked load left is listed as a root that keeps
its snapshot, data files and raw batch until its ref age passes; then the plan removes the branch, expires its snapshot and
deletes the data files only it held, while the blocked batch's raw object stays (it never reached main: awaiting load)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dsv_platform.core.ingest.staging import STAGING_MAX_AGE_MS
from dsv_platform.core.retention.gc import DataFileInfo, Inventory, RawBatchInfo, SnapshotInfo, StoredObject, TagInfo, plan_gc

NOW = datetime(2030, 1, 10, tzinfo=UTC)
OLD = NOW - timedelta(days=30)


def _inventory() -> Inventory:
    files = {"f1": "b1", "f2": "b2", "f3": "b3", "f4": "b4"}  # b3: staged on the young branch, b4: on the old one
    snapshots = [
        SnapshotInfo("tx", 1, OLD, False, ("f1",), None),
        SnapshotInfo("tx", 2, OLD, True, ("f1", "f2"), 1),  # main
        SnapshotInfo("tx", 3, NOW - timedelta(days=2), False, ("f1", "f2", "f3"), 2),
        SnapshotInfo("tx", 4, NOW - timedelta(days=10), False, ("f1", "f2", "f4"), 2),
    ]
    tags = [TagInfo("tx", "wap-young", 3, STAGING_MAX_AGE_MS, branch=True), TagInfo("tx", "wap-old", 4, STAGING_MAX_AGE_MS, branch=True)]
    data = [DataFileInfo("tx", path, 10, OLD, (batch,)) for path, batch in files.items()]
    raw = [RawBatchInfo(batch, f"raw-{batch}", 5, True, OLD) for batch in files.values()]
    objects = [StoredObject(f"raw-{batch}", 5, OLD) for batch in files.values()]
    return Inventory(NOW, {"w": 1}, objects=objects, snapshots=snapshots, tags=tags, data_files=data, raw_batches=raw)


def test_a_young_staging_branch_is_a_root_and_an_old_one_is_collected_but_its_raw_batch_kept() -> None:
    plan = plan_gc(_inventory())
    decisions = {(d.kind, d.id): d for d in plan.decisions}
    [root] = [r for r in plan.roots if r.kind == "staging_branch"]
    assert root.id == "staging:tx#wap-young" and root.expires_at == NOW - timedelta(days=2) + timedelta(days=7)
    for node in (("iceberg_tag", "tx#wap-young"), ("iceberg_snapshot", "tx@3"), ("data_file", "f3"), ("raw_batch", "b3"), ("object", "raw-b3")):
        assert decisions[node].keep, node
    old = decisions[("iceberg_tag", "tx#wap-old")]
    assert not old.keep and old.action == "remove_tag" and "staging branch of a blocked load" in old.reason
    assert decisions[("iceberg_snapshot", "tx@4")].action == "expire_snapshot"
    assert decisions[("data_file", "f4")].action == "delete_data_file"
    assert decisions[("data_file", "f2")].keep and decisions[("raw_batch", "b2")].keep  # main's
    assert decisions[("raw_batch", "b4")].keep and decisions[("object", "raw-b4")].keep, "a blocked batch's raw bytes are never collected with its branch"
    assert "landing:b4" in {r.id for r in plan.roots}
    assert "landing:b2" not in {r.id for r in plan.roots}  # a batch on main is loaded, as before
