"""Privacy deletion reaches raw landing batches and canonical Iceberg rows, on a small fraud world.

After deleting a subject: the canonical tables' current snapshots hold no row
of it, older snapshots holding it are released (the REDACTED realization's
tags removed) and expired, the raw batches that held it are crypto-erased
(landed encrypted: their keys destroyed) and marked redacted in the landing index, a realization built
afterwards excludes it, a rerun records nothing new, and a legal basis for
``raw_batch`` keeps the batches.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
from pyiceberg.expressions import EqualTo

from dsv_platform import open_dataset
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.core.privacy.privacy import DescendantKind, Outcome
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy import PrivacyCoordinator
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform_tests.scenarios.support import World

K = DescendantKind
SUBJECT_TABLES = [spec for spec in SOURCES.values() if "account_id" in spec.contract.column_names]


def coordinator_for(world: World) -> PrivacyCoordinator:
    store = build_encrypted_store(world.settings)
    key = load_subject_key(world.settings.subject_key_path)  # the key realization builds hash subjects with (their exclusion filter)
    w = world
    return PrivacyCoordinator(w.registry, store, actor="privacy-officer", zone=w.zone, tables=w.tables, config=w.platform.config, subject_key=key)


def current_rows(world: World, subject: str) -> int:
    total = 0
    for spec in SUBJECT_TABLES:
        tbl = world.tables.table(spec)
        if tbl.current_snapshot() is not None:
            total += tbl.scan(row_filter=EqualTo("account_id", subject)).to_arrow().num_rows
    return total


def holds(world: World, ref: str, subject: str) -> bool:
    table = open_dataset(ref, settings=world.settings).to_arrow()
    return bool(pc.any(pc.equal(table.column("account_id"), subject)).as_py())


def test_deletion_reaches_raw_batches_and_canonical_rows(tmp_path: Path) -> None:
    world = World.create(tmp_path / "world")
    before = world.build("v6")
    subject = str(open_dataset(before.ref, settings=world.settings).to_arrow().column("account_id")[0])
    assert current_rows(world, subject) > 0
    coordinator = coordinator_for(world)

    plan = coordinator.plan(subject, "GDPR art. 17 request #10")
    kinds = {d.descendant.kind for d in plan.decisions}
    assert {K.RAW_BATCH, K.CANONICAL_ROWS, K.REALIZATION} <= kinds
    assert subject not in str(plan.to_document())
    raw = sorted(d.descendant.id for d in plan.decisions if d.descendant.kind is K.RAW_BATCH)
    assert raw and all(world.platform.store.exists(digest) and world.platform.store.is_encrypted(digest) for digest in raw)
    assert {d.outcome for d in plan.decisions if d.descendant.kind is K.RAW_BATCH} == {Outcome.CRYPTO_ERASED}
    assert {d.outcome for d in plan.decisions if d.descendant.kind is K.CANONICAL_ROWS} == {Outcome.DELETED}

    report = coordinator.apply(plan)
    by_kind: dict[str, list[dict]] = {}
    for o in report.outcomes:
        by_kind.setdefault(o["kind"], []).append(o)
    assert len(report.outcomes) == len(plan.decisions)  # one outcome per descendant

    # canonical: the current snapshots hold no row of the subject; older snapshots holding it were released and expired
    assert current_rows(world, subject) == 0
    canonical = {o["id"]: o["detail"] for o in by_kind["canonical_rows"]}
    assert world.tables.identifier(SOURCES["transactions"]) in canonical
    pinned_tags = {p.tag for p in before.pins}
    for spec in SUBJECT_TABLES:
        detail = canonical.get(world.tables.identifier(spec))
        if detail is None:
            continue
        assert detail["rows"] > 0 and detail["snapshot_after"] != detail["snapshot_before"]
        assert set(detail["removed_tags"]) <= pinned_tags and detail["removed_tags"]  # the REDACTED realization's tag
        assert detail["expired_snapshots"] and detail["protected_snapshots"] == {}
        assert world.tables.snapshots_matching(spec, EqualTo("account_id", subject)) == []
        assert not set(world.tables.tags(spec)) & set(detail["removed_tags"])
    assert world.registry.find_by_manifest_hash(before.manifest_hash).state is RealizationState.REDACTED  # type: ignore[union-attr]

    # raw: the batch objects are crypto-erased and the landing index marks them redacted with the generation
    assert {o["id"] for o in by_kind["raw_batch"]} == set(raw)
    assert {o["outcome"] for o in by_kind["raw_batch"]} == {"crypto_erased"}
    for digest in raw:
        assert not world.platform.store.exists(digest) and world.platform.store.keys.is_erased(digest)
        marked = [r for r in world.zone.records() if r.digest == digest]
        assert marked and all(r.redacted_generation == report.generation and not r.loadable for r in marked)
    assert all(not r.redacted for r in world.zone.records() if r.digest not in raw)

    # a realization built after the deletion excludes the subject
    after = world.build("v6")
    assert after.manifest_hash != before.manifest_hash
    assert not holds(world, after.ref, subject)
    assert open_dataset(after.ref, settings=world.settings).verify_content()

    # rerun: no new generation, no new outcome, no change to the tables or the landing index
    snapshots = {spec.name: world.tables.current_snapshot_id(spec) for spec in SUBJECT_TABLES}
    records = world.zone.records()
    again = coordinator_for(world).delete(subject, "GDPR art. 17 request #10")
    assert not again.created and again.generation == report.generation == world.registry.redaction_generation()
    assert again.outcomes == report.outcomes
    assert {spec.name: world.tables.current_snapshot_id(spec) for spec in SUBJECT_TABLES} == snapshots
    assert world.zone.records() == records
    assert coordinator.status(subject)["deleted"] is True


def test_legal_basis_for_raw_batches_keeps_them(tmp_path: Path) -> None:
    world = World.create(tmp_path / "world", days=3)
    spec = SOURCES["transactions"]
    subject = str(world.tables.read(spec).column("account_id")[0])
    coordinator = coordinator_for(world)

    report = coordinator.delete(subject, "GDPR art. 17 request #11", retain={K.RAW_BATCH: "AML record keeping, 5 years"})
    raw = [o for o in report.outcomes if o["kind"] == "raw_batch"]
    assert raw and {o["outcome"] for o in raw} == {"retained"} and {o["legal_basis"] for o in raw} == {"AML record keeping, 5 years"}
    for o in raw:
        assert world.platform.store.exists(o["id"])
        assert all(not r.redacted for r in world.zone.records() if r.digest == o["id"])
    assert current_rows(world, subject) == 0  # canonical rows are still deleted
    assert {o["outcome"] for o in report.outcomes if o["kind"] == "canonical_rows"} == {"deleted"}
