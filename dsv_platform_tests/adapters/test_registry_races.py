"""Races between real processes (forked from a server that imported the platform: fixtures/forked.py), each opening its own
Registry from the URL."""

from __future__ import annotations

import itertools
import queue as queue_mod
import time
from typing import Any

import pytest

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.records import PublishResult, StaleAliasError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform_tests.adapters.test_registry import NAME, VERSION, make_manifest, published, registry_url
from dsv_platform_tests.fixtures import forked

__all__ = ["registry_url"]  # the parametrized SQLite / PostgreSQL fixture

S = RealizationState
PROCESSES = 8
MOVES = 20
TIMEOUT = 180


def _publish_worker(url: str, index: int, barrier: Any, results: Any) -> None:
    reg = Registry.from_url(url)
    try:
        rid = reg.create_candidate(NAME, VERSION, f"create-{index}", "2026-06-24", f"builder-{index}")
        # Three distinct builds: some builders produce the same manifest, others a different one.
        reg.seal(rid, make_manifest(f"build-{index % 3}"))
        barrier.wait(timeout=TIMEOUT)
        outcome = reg.publish(rid, f"publish-{index}")
        replay = reg.publish(rid, f"publish-{index}")  # a builder retrying after a timeout
        results.put((index, rid, outcome.realization.id, outcome.created, outcome.result.value, replay.realization.id, None))
    except Exception as exc:  # reported to the parent, which fails the test with it
        results.put((index, None, None, None, None, None, repr(exc)))
    finally:
        reg.close()


def _alias_worker(url: str, index: int, targets: list[str], barrier: Any, results: Any) -> None:
    reg = Registry.from_url(url)
    conflicts = moves = 0
    try:
        barrier.wait(timeout=TIMEOUT)
        for move in range(MOVES):
            current = reg.get_alias(NAME, VERSION, "production")
            assert current is not None
            expect = current.target
            while True:  # compare-and-swap retry loop: on conflict, retry from the actual target
                new = targets[(targets.index(expect) + 1 + index) % len(targets)]
                try:
                    reg.set_alias(NAME, VERSION, "production", new, expect=expect, actor=f"mover-{index}", reason=f"move {move}")
                    moves += 1
                    break
                except StaleAliasError as exc:
                    conflicts += 1
                    assert exc.actual is not None
                    expect = exc.actual
        results.put((index, moves, conflicts, None))
    except Exception as exc:
        results.put((index, moves, conflicts, repr(exc)))
    finally:
        reg.close()


def _run(target: Any, args_for: Any) -> list[Any]:
    ctx = forked.CONTEXT
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_for(i), barrier, results)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    out: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < len(procs):
            try:
                out.append(results.get(timeout=1))
            except queue_mod.Empty:
                crashed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if crashed:
                    pytest.fail(f"a racing process died without reporting (exit codes {crashed})")
                if time.monotonic() > deadline:
                    pytest.fail(f"racing processes did not all report within {TIMEOUT}s")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    errors = [r[-1] for r in out if r[-1] is not None]
    assert not errors, errors
    return out


def _setup(url: str) -> Registry:
    reg = Registry.from_url(url)
    reg.register_definition(NAME, VERSION, contract={"name": NAME}, recipe={}, owner="data-platform")
    return reg


def test_registry_races_publish_same_logical_version_has_one_winner(registry_url: str) -> None:
    reg = _setup(registry_url)
    out = _run(_publish_worker, lambda i: (registry_url, i))
    winners = {r[2] for r in out}
    assert len(winners) == 1, out
    (winner,) = winners
    assert sum(1 for r in out if r[3]) == 1
    assert all(r[5] == winner for r in out)  # replays reconcile to the same winner
    assert {r[4] for r in out} <= {PublishResult.CREATED.value, PublishResult.SAME_MANIFEST.value, PublishResult.LOST_RACE.value}
    states = {r[1]: reg.get(r[1]).state for r in out}
    assert [rid for rid, st in states.items() if st is S.PUBLISHED] == [winner]
    assert all(st is S.ABANDONED for rid, st in states.items() if rid != winner)
    assert [r.id for r in reg.versions(NAME)] == [winner]
    assert reg.resolve(NAME, VERSION).id == winner
    for rid in states:
        events = reg.events(rid)
        assert [e.to_state for e in events][:2] == [S.STAGING, S.SEALED] and len(events) == 3
    reg.close()


def test_registry_races_alias_cas_loses_no_update(registry_url: str) -> None:
    reg = _setup(registry_url)
    built = [published(reg, f"target-{i}") for i in range(5)]
    for rid, _ in built:
        reg.approve(rid, reason="release candidate", actor="ops")  # production is protected: only ELIGIBLE targets
    targets = [manifest.manifest_hash for _, manifest in built]
    reg.set_alias(NAME, VERSION, "production", targets[0], expect=None, actor="ops")
    out = _run(_alias_worker, lambda i: (registry_url, i, targets))
    assert sum(r[1] for r in out) == PROCESSES * MOVES
    history = reg.alias_history(NAME, VERSION, "production")
    assert len(history) == 1 + PROCESSES * MOVES
    assert [m.generation for m in history] == list(range(1, len(history) + 1))
    assert history[0].old_target is None
    for prev, nxt in itertools.pairwise(history):
        assert nxt.old_target == prev.new_target
    final = reg.get_alias(NAME, VERSION, "production")
    assert final is not None and (final.target, final.generation) == (history[-1].new_target, len(history))
    assert sum(1 for m in history[1:] if m.actor.startswith("mover-")) == PROCESSES * MOVES
    reg.close()
