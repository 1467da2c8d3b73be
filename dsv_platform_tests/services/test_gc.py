"""Reachability GC on real registries (SQLite, PostgreSQL) and a real object store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ExpiredError
from dsv_platform.core.publication.states import READABLE, RealizationState
from dsv_platform.core.retention.gc import GcPlan
from dsv_platform.services.retention import gc
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.services import gc_support as gs
from dsv_platform_tests.services import gc_worker

S = RealizationState
LATER = timedelta(days=2)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def reg(url: str) -> Iterator[Registry]:
    r = Registry.from_url(url)
    yield r
    r.close()


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects", fsync=False)


def later() -> datetime:
    return datetime.now(UTC) + LATER


def expected_kept(reg: Registry, h: gs.History, rooted: set[str]) -> set[str]:
    keep = set(rooted)
    for v in ("v1", "v2"):
        keep.add(reg.resolve(gs.NAME, v).manifest_hash)  # heads
    return keep


def test_gc_keeps_every_rooted_object_and_deletes_the_rest(reg: Registry, store: LocalObjectStore) -> None:
    h = gs.generate(reg, store, 200)
    manifests = {m.manifest_hash: m for _, m in h.published + h.failed}
    pub = [m for _, m in h.published]
    rooted: set[str] = set()
    for i, m in enumerate(pub[::7]):  # model versions, overlapping with reports and holds below
        reg.add_retention_root("model_version", f"{gs.NAME}:{m.version}@sha256:{m.manifest_hash}", f"model {i}", "ml-team")
        rooted.add(m.manifest_hash)
    for m in pub[::11]:
        reg.add_retention_root("report", f"realization:{m.manifest_hash}", "eval report", "analytics")
        rooted.add(m.manifest_hash)
    expired_root = reg.add_retention_root("experiment", f"realization:{pub[1].manifest_hash}", "old experiment", "x", datetime.now(UTC) + timedelta(hours=1))
    released = reg.add_retention_root("experiment", f"realization:{pub[2].manifest_hash}", "dropped", "x")
    reg.release_retention_root(released, "tests", "no longer needed")
    reg.set_alias(gs.NAME, pub[3].version, "prod", pub[3].manifest_hash, expect=None, actor="tests")
    rooted.add(pub[3].manifest_hash)
    orphan = store.put(b"nobody references me")
    keep = expected_kept(reg, h, rooted)

    plan = gc.plan(reg, store, now=later())
    assert expired_root and not plan.dangling_roots
    kept_objects = set().union(*(gs.objects_of(manifests[mh]) for mh in keep))
    report = gc.apply_plan(plan, registry=reg, store=store, dry_run=False)
    remaining = {o.digest for o in store.iter_objects()}
    assert kept_objects <= remaining
    assert remaining == kept_objects, "everything no root reaches is deleted"
    assert orphan in report.objects_deleted
    for mh, m in manifests.items():
        r = reg.find_by_manifest_hash(mh)
        assert r is not None
        if mh in keep:
            assert r.state in READABLE
            assert gs.objects_of(m) <= remaining
        else:
            assert r.state is S.EXPIRED
    gone = next(m for m in pub if m.manifest_hash not in keep)
    with pytest.raises(ExpiredError):
        reg.resolve(gs.NAME, gone.version, gone.manifest_hash)
    again = gc.plan(reg, store, now=later())
    assert again.collectable() == [], "a second run finds nothing more"


def test_dry_run_changes_nothing_and_plan_round_trips(reg: Registry, store: LocalObjectStore) -> None:
    gs.generate(reg, store, 20)
    before = {o.digest for o in store.iter_objects()}
    plan = GcPlan.from_document(gc.plan(reg, store, now=later()).to_document())
    report = gc.apply_plan(plan, registry=reg, store=store)
    assert report.dry_run and report.objects_deleted and report.expired
    assert {o.digest for o in store.iter_objects()} == before


def test_safety_window_keeps_recent_things(reg: Registry, store: LocalObjectStore) -> None:
    gs.generate(reg, store, 20)
    plan = gc.plan(reg, store)  # now: everything is younger than 24 h
    assert plan.collectable() == []


def test_legal_hold_keeps_an_otherwise_expired_realization(reg: Registry, store: LocalObjectStore) -> None:
    h = gs.generate(reg, store, 20)
    failed_id, failed = h.failed[0]
    old_id, old = h.published[0]
    reg.add_retention_root("legal_hold", f"realization:{failed.manifest_hash}", "litigation 42", "legal")
    reg.add_retention_root("legal_hold", f"{gs.NAME}:{old.version}@sha256:{old.manifest_hash}", "litigation 42", "legal")
    plan = gc.plan(reg, store, now=later())
    for m in (failed, old):
        (d,) = plan.find(f"realization:{m.manifest_hash}")
        assert d.keep and plan.explain(f"realization:{m.manifest_hash}")[0].root.kind == "legal_hold"  # type: ignore[union-attr]
    gc.apply_plan(plan, registry=reg, store=store, dry_run=False)
    assert reg.get(failed_id).state is S.FAILED and reg.get(old_id).state is S.PUBLISHED
    assert all(store.exists(o) for o in gs.objects_of(failed) | gs.objects_of(old))
    other_failed = h.failed[1][0]
    assert reg.get(other_failed).state is S.EXPIRED


def test_stale_plan_is_refused(reg: Registry, store: LocalObjectStore) -> None:
    gs.generate(reg, store, 10)
    plan = gc.plan(reg, store, now=later())
    reg.add_retention_root("legal_hold", f"{gs.NAME}:v1", "new hold", "legal")
    with pytest.raises(gc.GcPlanStaleError):
        gc.apply_plan(plan, registry=reg, store=store, dry_run=False)
    assert all(store.exists(d.id) for d in plan.collectable("delete_object"))


def test_abandoned_staging_is_collected_after_the_window(reg: Registry, store: LocalObjectStore) -> None:
    store.stage("c1-abc", "part.parquet", b"left behind")
    plan = gc.plan(reg, store, now=later())
    assert [d.id for d in plan.collectable("abandon_staging")] == ["c1-abc"]
    gc.apply_plan(plan, registry=reg, store=store, dry_run=False)
    assert store.list_staging() == []


@pytest.mark.slow  # a process killed mid-apply, per marker and backend
@pytest.mark.parametrize("marker,count", [("expired", 3), ("object_deleted", 5)])
def test_crash_mid_apply_leaves_no_half_deleted_readable_realization(reg: Registry, store: LocalObjectStore, url: str, marker: str, count: int) -> None:
    h = gs.generate(reg, store, 60)
    for _, m in h.published[::5]:
        reg.add_retention_root("model_version", f"realization:{m.manifest_hash}", "model", "ml")
    code, out = forked.Worker(gc_worker.main, [url, str(store.root), marker, str(count)]).communicate(timeout=120)
    assert code == -9, out[-3000:]

    def readable_ones_are_whole() -> None:
        for _, m in h.published + h.failed:
            r = reg.find_by_manifest_hash(m.manifest_hash)
            assert r is not None
            if r.state in READABLE:
                assert all(store.exists(o) for o in gs.objects_of(m)), f"{r.ref} is readable but lost objects"

    readable_ones_are_whole()
    plan = gc.plan(reg, store, now=later())
    gc.apply_plan(plan, registry=reg, store=store, dry_run=False)
    readable_ones_are_whole()
    assert gc.plan(reg, store, now=later()).collectable() == [], "the rerun finished"


def test_registry_inventory_reads_what_the_orm_reads(reg: Registry, store: LocalObjectStore) -> None:
    """The bulk read (plain DBAPI rows, each distinct time parsed once) gives the ORM's values: aware UTC times, the stored documents."""
    import json

    from sqlalchemy import select

    from dsv_platform.adapters.registry import schema as s
    from dsv_platform.adapters.registry.gc_inventory import read_inventory

    gs.generate(reg, store, 20)
    inv = read_inventory(reg, now=later())
    r, c = s.realizations, s.publication_claims
    with reg.engine.connect() as conn:
        stmt = select(r.c.id, r.c.dataset, r.c.version, r.c.state, r.c.manifest_hash, r.c.logical_key, r.c.created_at, c.c.claimed_at)
        rows = conn.execute(stmt.outerjoin_from(r, c, c.c.realization_id == r.c.id)).all()
        docs = {m: json.loads(t) for m, t in conn.execute(select(s.manifests.c.manifest_hash, s.manifests.c.canonical_json))}
    assert sorted(inv.realizations) == sorted(tuple(row) for row in rows)
    assert any(x.published_at for x in inv.realizations) and any(x.published_at is None for x in inv.realizations)
    assert all(x.created_at.utcoffset() == timedelta(0) for x in inv.realizations)
    assert inv.manifests == docs and docs
