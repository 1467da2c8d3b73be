"""Issue 11 item 6: four processes publish and move the same alias at once (SQLite and PostgreSQL).

Each process (forked from a server that imported the platform, its own Registry from the URL) runs the
full build protocol; two pairs build identical content. Then all four try to
move ``production`` from the target they all saw before the race, by strict
compare-and-swap: one wins, the losers get a typed one-line conflict error and
retry through ``Publisher.move_alias``. Afterwards: one realization per
content, every successful move is in the alias history (nothing lost), and the
history is a single chain (each move's previous target is the prior move's new target).
"""

from __future__ import annotations

import itertools
import queue as queue_mod
import time
from pathlib import Path
from typing import Any

import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import AliasConflictError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.publication.publisher import BuildStep, Publisher
from dsv_platform_tests.adapters.test_registry import registry_url
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.services import publisher_worker as pw

__all__ = ["registry_url"]  # the parametrized SQLite / PostgreSQL fixture

pytestmark = pytest.mark.slow

S = RealizationState
PROCESSES = 4
ALIAS = "production"
ROWS = 30
TIMEOUT = 180


def _seed(index: int) -> int:
    return 10 + index % 2  # processes 0 and 2 build one content, 1 and 3 another


def _publisher(url: str, store_root: str, index: int, baseline: str, barrier: Any, results: Any) -> None:
    reg = Registry.from_url(url)
    moves: list[str] = []

    def on_step(step: BuildStep, detail: str) -> None:
        if step is BuildStep.ALIAS_MOVED:
            moves.append(detail)

    try:
        publisher = Publisher(reg, LocalObjectStore(store_root, fsync=False), actor=f"publisher-{index}", on_step=on_step)
        request = pw.request(f"req-{index}", logical_key=f"lk-{_seed(index)}", parts=pw.partitions(rows=ROWS, seed=_seed(index)))
        barrier.wait(timeout=TIMEOUT)
        result = publisher.build(request)
        target = result.realization.manifest_hash
        assert target is not None
        reg.approve(result.realization.id, reason=f"release {index}", actor=f"publisher-{index}")  # production: ELIGIBLE targets only
        barrier.wait(timeout=TIMEOUT)
        conflict = None
        try:  # strict: from what everyone saw before the race
            reg.set_alias(pw.NAME, pw.VERSION, ALIAS, target, expect=baseline, actor=f"publisher-{index}", reason=f"race {index}")
            moves.append(f"{ALIAS} -> {target}")
        except AliasConflictError as exc:
            conflict = (type(exc).__name__, str(exc))
            publisher.move_alias(result.realization, ALIAS)  # the service's retrying move (from the actual target)
        outcome = result.outcome
        results.put((index, result.realization.id, target, outcome.result.value, outcome.candidate_id, conflict, moves, None))
    except Exception as exc:  # reported to the parent, which fails the test with it
        results.put((index, None, None, None, None, None, moves, repr(exc)))
    finally:
        reg.close()


def _race(url: str, store_root: str, baseline: str) -> list[Any]:
    ctx = forked.CONTEXT
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_publisher, args=(url, store_root, i, baseline, barrier, results)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    out: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < PROCESSES:
            try:
                out.append(results.get(timeout=1))
            except queue_mod.Empty:
                crashed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not crashed, f"a publisher died without reporting (exit codes {crashed})"
                assert time.monotonic() < deadline, f"publishers did not all report within {TIMEOUT}s"
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    errors = [r[-1] for r in out if r[-1] is not None]
    assert not errors, errors
    return sorted(out)


def test_four_publishers_race_on_one_alias(registry_url: str, tmp_path: Path) -> None:
    store_root = str(tmp_path / "objects")
    with Registry.from_url(registry_url) as reg:
        pw.register(reg)
        base = pw.build(reg, LocalObjectStore(store_root), "req-base", logical_key="lk-base", parts=pw.partitions(rows=ROWS, seed=3))
        baseline = base.manifest.manifest_hash
        reg.approve(base.realization.id, reason="baseline release", actor="ops")
        reg.set_alias(pw.NAME, pw.VERSION, ALIAS, baseline, expect=None, actor="ops")

    out = _race(registry_url, store_root, baseline)

    # no duplicate realization for the same content: processes with the same content got the same realization
    by_content: dict[int, set[tuple[int, str]]] = {}
    for index, rid, target, _result, _cand, _conflict, _moves, _err in out:
        by_content.setdefault(_seed(index), set()).add((rid, target))
    assert all(len(v) == 1 for v in by_content.values()), by_content
    assert len({t for v in by_content.values() for _, t in v}) == 2
    for seed in by_content:
        results = sorted(r[3] for r in out if _seed(r[0]) == seed)
        assert results == ["created", "same_manifest"], results

    # one strict winner; every loser a typed, one-line conflict naming the alias and where it points now
    winners = [r for r in out if r[5] is None]
    losers = [r for r in out if r[5] is not None]
    assert len(winners) == 1 and len(losers) == PROCESSES - 1, out
    for r in losers:
        kind, message = r[5]
        assert kind == "StaleAliasError" and "\n" not in message, r[5]
        assert f"{pw.NAME}:{pw.VERSION}@{ALIAS}" in message and baseline in message and "but points to " in message

    with Registry.from_url(registry_url) as reg:
        _check_history(reg, out, baseline)
        published = reg.versions(pw.NAME)
        assert sorted(r.manifest_hash or "" for r in published) == sorted({baseline} | {t for v in by_content.values() for _, t in v})
        assert all(r.state is S.ELIGIBLE for r in published)  # each approved before its move of the protected alias
        candidates = reg.versions(pw.NAME, include_candidates=True)
        assert sorted(r.state.value for r in candidates if r.state is not S.ELIGIBLE) == [S.ABANDONED.value] * 2


def _check_history(reg: Registry, out: list[Any], baseline: str) -> None:
    """Every reported move is in the history once, and the history is one chain of compare-and-swaps."""
    history = reg.alias_history(pw.NAME, pw.VERSION, ALIAS)
    reported = sum(len(r[6]) for r in out)
    assert len(history) == 1 + reported, (len(history), reported)
    assert [m.generation for m in history] == list(range(1, len(history) + 1))
    assert history[0].old_target is None and history[0].new_target == baseline
    for prev, nxt in itertools.pairwise(history):
        assert nxt.old_target == prev.new_target, "the alias history is not a single chain"
        assert nxt.new_target != nxt.old_target
    for index, _rid, _target, _res, _cand, _conflict, moves, _err in out:
        mine = [f"{ALIAS} -> {m.new_target}" for m in history if m.actor == f"publisher-{index}"]
        assert mine == moves, (index, mine, moves)
    final = reg.get_alias(pw.NAME, pw.VERSION, ALIAS)
    assert final is not None and (final.target, final.generation) == (history[-1].new_target, len(history))
