"""GC keeps everything a retained model needs, and GC deletion is a plain, re-creatable delete (issue 11, items 1 and 2).

* A retained model's closure (run manifest, environment lock, partitions,
  split assignment, quality report) survives ``gc apply`` with a zero safety
  window; rehearsal and reproduction stay at 100 %.
* The rule is generic: any digest a manifest document names is kept, whatever
  the field is called (a new kind of pinned object cannot be forgotten).
* An object GC deleted can be published again (no erasure tombstone), and a
  reader of the collected realization meets EXPIRED, never "crypto-erased".
* The CLI path (``dsv demo``, ``gc apply``, ``rehearse``) runs on the demo's home in cli/test_demo_cmd.py.

Builds pin a clean code commit (the HEAD of this checkout): a dirty working
tree makes any build NOT_REPRODUCIBLE_DIRTY by construction, which is not what
these tests are about.
"""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.core.errors import ExpiredError
from dsv_platform.core.publication.manifest import CodePin
from dsv_platform.core.retention.gc import GcPolicy, Inventory, StoredObject, plan_gc
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.publication.realization import RealizationBuild, build_realization, code_pin
from dsv_platform.services.reproduction.model_run import ModelRun, train_model
from dsv_platform.services.reproduction.rehearsal import rehearse
from dsv_platform.services.reproduction.reproduce import reproduce
from dsv_platform.services.retention import gc
from dsv_platform_tests.scenarios.support import World, definition

ZERO = GcPolicy(safety_window=timedelta(0))
CLEAN = CodePin(code_pin().commit, False)
DIGEST = "ab" * 32


def _build(world: World) -> RealizationBuild:
    return build_realization(world.platform, definition("v6"), code=CLEAN)


def _collect(world: World) -> list[str]:
    """Plan and apply GC with a zero safety window; the ids of the objects it deleted."""
    store = world.platform.store
    plan = gc.plan(world.registry, store, tables=world.tables, landing=world.zone, policy=ZERO)
    report = gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables, dry_run=False, actor="test")
    return report.objects_deleted


def _closure(world: World, build: RealizationBuild, run: ModelRun) -> dict[str, str]:
    """Every object the model's closure names, by what it is."""
    m = build.manifest
    assert m.environment is not None and m.splits is not None
    reports = [e.src_id for e in world.registry.lineage_edges() if e.relation == "reports_on" and e.dst_id == build.manifest_hash]
    assert reports, "the publisher records the quality report"
    named = {"run manifest": run.run_object, "environment lock": m.environment.lockfile_hash, "split assignment": m.splits.assignment_object}
    named |= {f"quality report {i}": r for i, r in enumerate(reports)}
    return named | {f"partition {p.key}": p.object for p in m.partitions}


def test_gc_keeps_every_object_a_retained_model_names(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(2)[1]
    retained = _build(world)
    no_lock = {"lockfile_sha256": "unknown"}  # CLEAN is a fiction over this checkout: the full rerun must never restore a worktree of it
    run = train_model(world.platform, retained.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7, code=CLEAN, environment=no_lock)
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    orphan = _build(world)
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=21), count=5)])
    newest = _build(world)
    assert len({retained.manifest_hash, orphan.manifest_hash, newest.manifest_hash}) == 3

    deleted = _collect(world)
    assert deleted, "the unretained realization's objects are garbage"
    closure = _closure(world, retained, run)
    assert not set(closure.values()) & set(deleted)
    for what, digest in closure.items():  # read BEFORE anything re-puts (the rehearsal stores today's lockfile again)
        assert world.platform.store.get(digest), f"{what} {digest} must still read after GC"

    with pytest.raises(ExpiredError, match="EXPIRED"):  # the collected realization answers EXPIRED, not REDACTED
        open_dataset(orphan.ref, settings=world.settings)
    rehearsal = rehearse(world.platform)
    assert rehearsal.retained == 1 and rehearsal.fraction == 1.0, [r.reason for r in rehearsal.failures]
    report = reproduce(world.platform, run.run_hash, actor="test")
    assert report.reconstructable, report.reason


def test_gc_deleted_content_can_be_published_again(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(3)[2]
    old = _build(world)
    parts = {p.object: world.platform.store.get(p.object) for p in old.manifest.partitions}
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=30), count=5)])
    _build(world)  # the new head: nothing keeps ``old`` any more
    deleted = set(_collect(world)) & set(parts)
    assert deleted, "GC deleted the old realization's partition objects"
    store = world.platform.store
    for digest in sorted(deleted):
        assert not store.exists(digest)
        assert not store.keys.is_erased(digest), "GC leaves no erasure tombstone"
        assert store.put(parts[digest]) == digest  # republishing the same bytes succeeds (ObjectErasedError before)
        assert store.get(digest) == parts[digest]


def test_any_digest_a_manifest_names_is_kept_whatever_the_field() -> None:
    """A future manifest field naming an object (here ``new_pin.thing``, and in a run manifest) keeps that object."""
    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    old = now - timedelta(days=30)
    realization_doc = {"partitions": [], "new_pin": {"thing": f"sha256:{DIGEST}"}}
    run_doc = {"format": "dsv-model-run/1", "future": [{"blob": "cd" * 32}]}
    objects = [StoredObject(DIGEST, 10, old), StoredObject("cd" * 32, 10, old), StoredObject("ef" * 32, 10, old)]
    from dsv_platform.core.lineage.lineage import Edge
    from dsv_platform.core.retention.gc import RealizationInfo, RootSpec

    mh, run_hash = "11" * 32, "22" * 32
    inv = Inventory(
        observed_at=now,
        watermark={},
        realizations=[RealizationInfo(1, "d", "v1", "PUBLISHED", mh, "k", old, old)],
        manifests={mh: realization_doc},
        objects=objects,
        roots=[RootSpec("1", "model_version", f"model_run:{run_hash}", "retained", "ml")],
        lineage=[Edge("realization", mh, "model_run", run_hash, "trained", {"run_object": run_hash})],
        run_manifests={run_hash: run_doc},
    )
    plan = plan_gc(inv, GcPolicy(safety_window=timedelta(0), keep_heads=False))
    kept = {d.id for d in plan.decisions if d.kind == "object" and d.keep}
    assert kept == {DIGEST, "cd" * 32}
    assert {d.id for d in plan.decisions if d.kind == "object" and not d.keep} == {"ef" * 32}
