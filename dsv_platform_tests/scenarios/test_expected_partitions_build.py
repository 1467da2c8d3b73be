"""A build whose window misses a day that was not declared empty is blocked naming the day (issue 27 item 9).

A real world (SQLite catalog and registry, local objects) with five days of June landed: the definition expects
every June day, declaring the other twenty-five empty (it publishes), or one fewer (in another home: it is blocked).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from dsv_platform.core.config.expected_partitions import ExpectedPartitions
from dsv_platform.core.errors import PublicationError
from dsv_platform.services.publication.realization import ALIAS, build_realization
from dsv_platform_tests.scenarios.support import World, definition

DAYS = 5


def _expecting(declared_empty: list[dt.date]):  # type: ignore[no-untyped-def]
    d = definition("v6")
    gates = {**d.document["gates"], "expected_partitions": {"declared_empty": [x.isoformat() for x in declared_empty]}}
    expected = dataclasses.replace(d.gates, expected_partitions=ExpectedPartitions(tuple(declared_empty)))
    return dataclasses.replace(d, gates=expected, document={**d.document, "gates": gates})  # the recipe names the gate too


def test_every_expected_day_present_publishes_and_a_missing_one_blocks(tmp_path) -> None:
    world = World.create(tmp_path / "dsv", rows_per_day=40, days=DAYS)
    june = definition("v6").observation_window.days()
    landed = june[:DAYS]
    good = build_realization(world.platform, _expecting(june[DAYS:]))
    [gate] = [g for g in good.gates if g.name == "expected_partitions"]
    assert gate.passed and gate.detail["expected"] == DAYS and gate.detail["declared_empty"] == 30 - DAYS

    world = World.create(tmp_path / "other", rows_per_day=40, days=DAYS)  # a changed gate is a changed recipe: another definition version
    with pytest.raises(PublicationError) as info:
        build_realization(world.platform, _expecting(june[DAYS + 1 :]))  # the 6th of June is expected, and has no rows
    assert "expected_partitions" in str(info.value), info.value
    failed = world.registry.versions("fraud_training_set", include_candidates=True)[0]
    from dsv_platform.services.publication.semantic_gate import stored_gates

    [blocked] = [g for g in stored_gates(world.platform, failed.manifest_hash, None) if g.name == "expected_partitions"]
    assert not blocked.passed and blocked.detail["missing"] == june[DAYS].isoformat() and blocked.detail["present"] == len(landed)
    assert world.registry.get_alias("fraud_training_set", "v6", ALIAS) is None, "a blocked build moves no alias"
