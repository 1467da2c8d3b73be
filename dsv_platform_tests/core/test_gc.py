"""The pure GC plan: reachability from roots, the safety window, explanations, plan documents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsv_platform.core.lineage.lineage import Edge
from dsv_platform.core.retention.gc import (
    AliasInfo,
    GcPlan,
    GcPlanError,
    Inventory,
    RealizationInfo,
    RootSpec,
    SnapshotInfo,
    StoredObject,
    TagInfo,
    plan_gc,
    root_costs,
)

NOW = datetime(2030, 1, 10, tzinfo=UTC)
OLD = NOW - timedelta(days=30)


def h(i: int) -> str:
    return format(i, "064x")


def manifest(i: int, objects: list[str], *, table_snapshot: int | None = None) -> dict:
    sources = [{"table": "tx", "snapshot_id": str(table_snapshot), "tag": f"t{i}", "attributes": {}}] if table_snapshot else []
    partitions = [{"key": f"p{j}", "object": o, "bytes": 10} for j, o in enumerate(objects)]
    return {"partitions": partitions, "sources": sources, "splits": None, "labels": None, "attachments": {}}


def inventory(roots: list[RootSpec], *, aliases: list[AliasInfo] = (), realization_time: datetime = OLD, lineage: list[Edge] = ()) -> Inventory:  # type: ignore[assignment]
    rs = [RealizationInfo(i, "ds", "v1", "PUBLISHED", h(i), f"lk{i}", realization_time, realization_time + timedelta(seconds=i)) for i in range(1, 5)]
    manifests = {
        h(1): manifest(1, [h(101), h(100)], table_snapshot=7),
        h(2): manifest(2, [h(102), h(100)]),
        h(3): manifest(3, [h(103)]),
        h(4): manifest(4, [h(104)]),
    }
    objects = [StoredObject(h(i), 10, OLD) for i in range(100, 106)]
    snapshots = [SnapshotInfo("tx", 7, OLD, False), SnapshotInfo("tx", 8, OLD, False), SnapshotInfo("tx", 9, OLD, True)]
    tags = [TagInfo("tx", "t1", 7), TagInfo("tx", "t-old", 8)]
    return Inventory(NOW, {"w": 1}, rs, manifests, objects, (), snapshots, tags, (), (), aliases, roots, lineage)


def by_id(plan: GcPlan) -> dict[str, bool]:
    return {d.id: d.keep for d in plan.decisions if d.kind != "manifest"}


def test_gc_keeps_what_roots_reach_and_collects_the_rest() -> None:
    plan = plan_gc(inventory([RootSpec("1", "model_version", f"ds:v1@sha256:{h(1)}", "model", "ml")]))
    keep = by_id(plan)
    assert keep[h(1)] and keep[h(101)] and keep[h(100)]  # rooted realization and its objects (one shared)
    assert keep[h(4)], "the newest published realization is the head"
    assert not keep[h(2)] and not keep[h(102)] and not keep[h(3)] and not keep[h(105)]
    assert keep["tx@7"] and keep["tx#t1"] and keep["tx@9"]
    assert not keep["tx@8"] and not keep["tx#t-old"]
    actions = {d.id: d.action for d in plan.collectable()}
    assert actions[h(2)] == "expire_realization" and actions[h(102)] == "delete_object"
    assert actions["tx#t-old"] == "remove_tag" and actions["tx@8"] == "expire_snapshot"


def test_gc_expired_or_released_roots_do_not_count() -> None:
    spec = RootSpec("1", "legal_hold", f"realization:{h(2)}", "hold", "legal", NOW - timedelta(seconds=1))
    assert not by_id(plan_gc(inventory([spec])))[h(2)]
    spec = RootSpec("1", "legal_hold", f"realization:{h(2)}", "hold", "legal", NOW + timedelta(days=1))
    assert by_id(plan_gc(inventory([spec])))[h(2)]


def test_gc_aliases_are_roots_and_model_runs_reach_through_lineage() -> None:
    lineage = [Edge("realization", h(3), "model_run", h(900), "trained", {"run_object": h(105)})]
    root = RootSpec("5", "model_version", f"model_run:{h(900)}", "prod model", "ml")
    plan = plan_gc(inventory([root], aliases=[AliasInfo("ds", "v1", "prod", h(2))], lineage=lineage))
    keep = by_id(plan)
    assert keep[h(2)] and keep[h(102)] and keep[h(3)] and keep[h(103)] and keep[h(105)]
    (why,) = plan.explain(h(103))
    assert why.root is not None and why.root.id == "5"
    assert [n for n, _ in why.path] == [("model_run", h(900)), ("realization", h(3)), ("object", h(103))]
    assert "prod model" in why.text()


def test_gc_safety_window_keeps_recent_nodes() -> None:
    plan = plan_gc(inventory([], realization_time=NOW - timedelta(hours=1)))
    assert all(d.keep for d in plan.decisions if d.kind == "realization")


def test_gc_dangling_root_is_reported() -> None:
    plan = plan_gc(inventory([RootSpec("9", "report", "no-such-thing", "r", "o")]))
    assert plan.dangling_roots == ["#9 report no-such-thing"]


def test_gc_plan_document_round_trips_and_refuses_garbage() -> None:
    plan = plan_gc(inventory([RootSpec("1", "model_version", f"realization:{h(1)}", "m", "o")]))
    again = GcPlan.from_document(plan.to_document())
    assert again.decisions == plan.decisions and again.watermark == plan.watermark
    assert again.explain(h(101))[0].path == plan.explain(h(101))[0].path
    with pytest.raises(GcPlanError):
        GcPlan.from_document({"format": "nope"})


def test_gc_root_costs_count_shared_and_exclusive_bytes() -> None:
    inv = inventory([RootSpec("1", "model_version", f"realization:{h(1)}", "m", "o"), RootSpec("2", "report", f"realization:{h(2)}", "r", "o")])
    costs = {c["id"]: c for c in root_costs(inv, plan_gc(inv))}
    assert costs["1"]["bytes"] == 20 and costs["1"]["exclusive_bytes"] == 10
    assert costs["2"]["bytes"] == 20 and costs["2"]["exclusive_bytes"] == 10


def test_named_digests_finds_exactly_what_the_walk_finds() -> None:
    from types import MappingProxyType

    from dsv_platform.core.retention.gc_graph import named_digests, walk_digests

    d = h(7)
    docs = [
        {"lock": d, f"sha256:{h(8)}": [1, None, True, {"x": (h(9), f"sha256:{h(10)}")}], "n": 10**70},
        {"a": f'"{d}"', "b": f'x"{d}', "c": f"{d}\\", "d": f"{d}x", "e": f"sha256:sha256:{d}", "f": h(0xABCDEF).upper(), "g": [f"[{d}]", f",{d}:"]},
        {"quoted": f'{{"k":"{d}"}}', "escaped": f'\\"{d}\\"', "unicode": f"é{d}", "tab": f"\t{d}"},
        [d, [h(11), {"k": {h(12): None}}]],
        d,
        {"frozen": MappingProxyType({"x": h(13)}), "set": {h(14)}, "ok": h(15)},  # not JSON: the walk itself
        {},
    ]
    for doc in docs:
        assert set(named_digests(doc)) == set(walk_digests(doc)), doc
    assert set(named_digests(docs[0])) == {h(7), h(8), h(9), h(10)}
    assert set(named_digests(docs[1])) == set()
    assert set(named_digests(docs[5])) == {h(13), h(15)}
