"""Semantic failure modes of the fraud example are blocked at publication.

A good realization publishes (with its semantic gates in the quality report); then amounts
sent in cents, and test accounts leaked into the feed, each give a FAILED realization whose
stored quality report names the failed rule, and the ``candidate`` alias does not move.
Each test builds its own small world (real SQLite catalog and registry, local objects).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dsv_platform.core.errors import PublicationError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud.demo_semantic import cents_batches, leaked_test_accounts, restore_batches
from dsv_platform.services.publication.realization import ALIAS, RealizationBuild
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_datasets import flip_byte

DAYS = 5


@pytest.fixture
def world(tmp_path) -> World:
    return World.create(tmp_path / "dsv", rows_per_day=40, days=DAYS)


def _good(world: World) -> RealizationBuild:
    good = world.build()
    semantic = {g.name: g for g in good.gates if g.name.startswith("semantic:")}
    assert semantic["semantic:plausibility:typical_p50:amount"].passed
    assert semantic["semantic:population:population:account_id"].passed
    assert semantic["semantic:completeness:max_null_rate:currency"].passed
    return good


def _blocked(world: World, good: RealizationBuild) -> tuple[dict[str, dict[str, Any]], str, dict[str, Any]]:
    """Build, expect a PublicationError; return the stored report's failed gates and the error text, after checking state and alias."""
    with pytest.raises(PublicationError) as info:
        world.build()
    message = str(info.value)
    digest = re.search(r"quality report object (\S+)\)", message)
    assert digest is not None, message
    report = json.loads(world.platform.store.get(digest.group(1)))
    assert report["passed"] is False
    newest = world.registry.versions("fraud_training_set", include_candidates=True)[0]
    assert newest.state is RealizationState.FAILED and newest.manifest_hash == report["manifest_hash"]
    assert newest.manifest_hash != good.manifest_hash
    alias = world.registry.get_alias("fraud_training_set", "v6", ALIAS)
    assert alias is not None and alias.target == good.manifest_hash, "the alias must not move to a failed build"
    assert world.registry.resolve("fraud_training_set", "v6").manifest_hash == good.manifest_hash
    return {g["name"]: g for g in report["gates"] if not g["passed"]}, message, report


def test_amounts_in_cents_are_blocked_by_the_typical_band(world):
    good = _good(world)
    days = world.domain.days(DAYS)
    world.ingest(cents_batches(world.domain, days, recorded_on=days[-1]))
    failed, message, report = _blocked(world, good)
    p50 = failed["semantic:plausibility:typical_p50:amount"]
    assert p50["blocking"] and p50["detail"]["bound"] == "[5, 200]" and float(p50["detail"]["observed"]) > 200
    assert "semantic:plausibility:typical_p50:amount" in message
    assert not [n for n, g in failed.items() if g["blocking"] and "amount" not in n], failed  # nothing else blocked
    assert report["gates"][[g["name"] for g in report["gates"]].index("semantic:baseline")]["detail"]["ref"] == good.ref
    drift = failed["semantic:drift:drift_p99:amount"]  # the drift against the good baseline is recorded, as a warning
    assert drift["blocking"] is False and float(drift["detail"]["observed"]) > 1.0
    world.ingest(restore_batches(world.domain, days, recorded_on=days[-1]))
    fixed = world.build()  # the source's fix publishes again and moves the alias
    assert fixed.manifest_hash != good.manifest_hash and all(g.passed for g in fixed.gates if g.blocking)
    assert world.registry.get_alias("fraud_training_set", "v6", ALIAS).target == fixed.manifest_hash


def test_leaked_test_accounts_are_blocked_by_the_population_rule(world):
    good = _good(world)
    days = world.domain.days(DAYS)
    world.ingest([leaked_test_accounts(world.domain, days[2], arrived=days[-1], count=5)])
    failed, message, _ = _blocked(world, good)
    population = failed["semantic:population:population:account_id"]
    assert population["blocking"] and population["detail"]["observed"].startswith("5 rows, e.g. 'test_0000")
    assert population["detail"]["bound"] == "no value matching /^test_/"
    assert [n for n, g in failed.items() if g["blocking"]] == ["semantic:population:population:account_id"]
    assert "semantic:population:population:account_id" in message


def test_an_unreadable_previous_publication_blocks_saying_baseline_unreadable(world):
    """Issue 25 item 9: corrupting the previous publication must not switch the drift and volume gates off."""
    good = _good(world)
    world.delete_object(good.manifest.partitions[0].object)
    days = world.domain.days(DAYS)
    world.ingest(cents_batches(world.domain, days, recorded_on=days[-1]))  # new source versions, then the fix:
    world.ingest(restore_batches(world.domain, days, recorded_on=days[-1]))  # a real rebuild (new pins), not a reuse
    failed, message, _ = _blocked(world, good)
    baseline = failed["semantic:baseline"]
    assert baseline["blocking"] and baseline["detail"]["reason"].startswith(f"baseline unreadable: {good.ref} (CORRUPT")
    assert "semantic:baseline" in message


def test_a_reused_build_whose_stored_report_does_not_read_shows_a_failed_gate(world):
    """Fail closed (#25 item 9): the report gone or garbled, a reuse reports one blocking failed gate naming it, never "no gates"."""
    from dsv_platform.defs.gate_checks import dataset_gates_result
    from dsv_platform.services.publication.semantic_gate import stored_gates, stored_semantic_gates

    good = _good(world)
    assert all(g.passed for g in stored_gates(world.platform, good.manifest_hash, None) if g.blocking)
    edges = world.registry.lineage_edges(node=("realization", good.manifest_hash))
    report = next(e.src_id for e in edges if e.relation == "reports_on" and e.src_kind == "quality_report")
    sealed = world.platform.store.keys.sealed(report)
    assert sealed is not None  # the report is encrypted at rest like every object
    for damage in ("garbled", "gone"):
        if damage == "garbled":
            flip_byte(world.platform.store.sealed_store.path(sealed))
        else:
            world.delete_object(report)
        again = world.build()
        assert again.reused and again.manifest_hash == good.manifest_hash
        [gate] = stored_gates(world.platform, good.manifest_hash, None)
        assert gate.name == "quality_report" and not gate.passed and gate.blocking and report in gate.detail["observed"], gate
        [semantic] = stored_semantic_gates(world.platform, good.manifest_hash)
        assert semantic.name == "semantic:quality_report" and not semantic.passed
        check = dataset_gates_result([gate])
        assert not check.passed and check.severity.value == "ERROR" and report in (check.description or ""), check
