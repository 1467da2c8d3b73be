"""Derived results kept for a realization are keyed by its manifest hash and served for no other (issue 27 item 11).

What the platform keeps and serves again per realization: the stored quality report (a reused build, `dsv status`
and the Dagster checks report its gates instead of running them again) and a reader's handle (its contract and split
assignment, kept for the handle's life). A real world (SQLite catalog and registry, encrypting local objects) with
two realizations of different manifest hashes: they share no entry; an entry re-pointed at the other manifest is
refused (one failed blocking gate naming both manifests), never served as the other's.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dsv_platform import open_dataset
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.publication.realization import RealizationBuild, build_realization
from dsv_platform.services.publication.semantic_gate import stored_gates
from dsv_platform.services.publication.status import definition_status
from dsv_platform_tests.scenarios.support import World, definition


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, RealizationBuild, RealizationBuild]:
    world = World.create(tmp_path_factory.mktemp("caches") / "dsv", days=2)
    first = world.build()
    world.ingest([daily_batch(world.domain, s, world.domain.days(3)[-1]) for s in SOURCES])  # a third day: new pins, a new manifest
    second = world.build()
    assert first.manifest_hash != second.manifest_hash and not second.reused
    return world, first, second


def _reports(world: World, manifest_hash: str) -> list[str]:
    edges = world.registry.lineage_edges(node=("realization", manifest_hash))
    return [e.src_id for e in edges if e.relation == "reports_on" and e.src_kind == "quality_report" and e.dst_id == manifest_hash]


def test_two_manifests_share_no_stored_report_and_each_report_names_its_own(two) -> None:
    world, first, second = two
    [a], [b] = _reports(world, first.manifest_hash), _reports(world, second.manifest_hash)
    assert a != b
    for digest, build in ((a, first), (b, second)):
        assert json.loads(world.platform.store.get(digest))["manifest_hash"] == build.manifest_hash
        served = {g.name: g.detail for g in stored_gates(world.platform, build.manifest_hash, None)}
        assert served["rows_at_least"]["rows"] == build.manifest.rows, "each manifest is served its own report"
    reused = build_realization(world.platform, definition("v6"))  # the same pins again: served from the store, for that manifest only
    assert reused.reused and reused.manifest_hash == second.manifest_hash


def test_a_report_re_pointed_at_another_manifest_is_refused_not_served(tmp_path) -> None:
    world = World.create(tmp_path / "dsv", days=2)
    first = world.build()
    world.ingest([daily_batch(world.domain, s, world.domain.days(3)[-1]) for s in SOURCES])
    second = world.build()
    [a] = _reports(world, first.manifest_hash)
    edge = ("quality_report", a, "realization", second.manifest_hash, "reports_on", {"passed": True})
    world.registry.record_lineage([edge], actor="test")  # the first manifest's report, renamed as the second's newest
    [refused] = stored_gates(world.platform, second.manifest_hash, None)
    assert refused.name == "quality_report" and not refused.passed and refused.blocking
    assert f"it is the report of manifest {first.manifest_hash}, not of {second.manifest_hash}" in str(refused.detail["observed"])
    assert {g.name for g in stored_gates(world.platform, first.manifest_hash, None)} >= {"rows_at_least"}, "the first is still served its own"
    status = definition_status(world.registry, world.platform.store, definition("v6"), now=dt.datetime.now(dt.UTC))
    assert status.usable_ref == first.ref, "dsv status takes no gate verdict from another manifest's report: the second is not usable"
    assert status.readable is not None and status.readable["warnings"] == ["quality_report (unreadable)"]


def test_a_readers_kept_contract_and_split_assignment_are_its_manifests(two) -> None:
    world, first, second = two
    with open_dataset(first.ref, settings=world.settings) as a, open_dataset(second.ref, settings=world.settings) as b:
        assert (a.manifest_hash, b.manifest_hash) == (first.manifest_hash, second.manifest_hash)
        assert a.manifest.splits is not None and b.manifest.splits is not None
        assert a.manifest.splits.assignment_object != b.manifest.splits.assignment_object
        assert a.split_assignment.num_rows == first.manifest.rows and b.split_assignment.num_rows == second.manifest.rows
        assert a.split_assignment is a.split_assignment, "kept for the handle's life, read once"
