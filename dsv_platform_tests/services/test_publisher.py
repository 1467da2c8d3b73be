"""The publication protocol through Publisher, on SQLite and PostgreSQL (docs/architecture.md, "Publication is a transaction")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import NotFoundError, PublicationError
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.publication.records import PublishResult
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw

S = RealizationState
DSV = str(Path(sys.executable).with_name("dsv"))


@pytest.fixture(params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The registry URL: a SQLite file under tmp_path, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def reg(backend_url: str) -> Iterator[Registry]:
    r = Registry.from_url(backend_url)
    pw.register(r)
    yield r
    r.close()


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects")


def cli_env(home: Path, url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "DSV_HOME": str(home), "DSV_REGISTRY_URL": url, "DSV_OBJECT_STORE": str(home / "objects"), "DSV_ACTOR": "tester", **extra}


def dsv(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DSV, *args], env=env, capture_output=True, text=True, timeout=120)


def test_publish_end_to_end(reg: Registry, store: LocalObjectStore) -> None:
    seen: list[str] = []
    publisher = Publisher(reg, store, actor="builder", on_step=lambda step, detail: seen.append(step.value))
    result = publisher.build(pw.request("req-e2e", alias="candidate"))  # not a protected alias: a fresh build is PUBLISHED, not ELIGIBLE
    assert result.outcome.result is PublishResult.CREATED and result.outcome.created
    assert result.realization.state is S.PUBLISHED
    assert result.realization.manifest_hash == result.manifest.manifest_hash
    assert result.manifest.rows == pw.ROWS * len(pw.DAYS)
    assert [p.key for p in result.manifest.partitions] == [d.isoformat() for d in pw.DAYS]
    assert seen == ["candidate", "part_written", "part_written", "part_written", "sealed", "gates_run", "published", "alias_moved"]
    assert result.report.passed
    assert store.exists(result.report_object)
    for part in result.manifest.partitions:
        store.verify(part.object)
    resolved = reg.resolve(pw.NAME, pw.VERSION)
    assert resolved.id == result.realization.id
    assert reg.resolve(pw.NAME, pw.VERSION, alias="candidate").manifest_hash == result.manifest.manifest_hash
    states = [e.to_state for e in reg.events(result.realization.id)]
    assert states == [S.STAGING, S.SEALED, S.PUBLISHED]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}\.1", result.realization.human_version or "")


def test_rebuild_with_same_request_id_is_idempotent(reg: Registry, store: LocalObjectStore) -> None:
    first = pw.build(reg, store, "req-same")
    again = pw.build(reg, store, "req-same")
    assert again.manifest.manifest_hash == first.manifest.manifest_hash
    assert again.realization.id == first.realization.id
    assert again.outcome.result is PublishResult.REPLAYED and not again.outcome.created
    published = reg.versions(pw.NAME)
    assert [(r.id, r.state) for r in published] == [(first.realization.id, S.PUBLISHED)]
    assert len(reg.versions(pw.NAME, include_candidates=True)) == 1
    assert Publisher(reg, store, actor="x").reconcile("req-same").id == first.realization.id  # type: ignore[union-attr]
    assert Publisher(reg, store, actor="x").reconcile("never-used") is None


def test_same_rows_in_another_order_and_chunking_give_the_same_manifest(reg: Registry, store: LocalObjectStore) -> None:
    plain = pw.build(reg, store, "req-plain", logical_key="lk-a")
    shuffled_parts = pw.partitions(shuffle=True)
    assert shuffled_parts[0][1].column(0).num_chunks > 1
    shuffled = pw.build(reg, store, "req-shuffled", logical_key="lk-b", parts=shuffled_parts)
    assert shuffled.manifest.manifest_hash == plain.manifest.manifest_hash
    assert shuffled.manifest.content_hash == plain.manifest.content_hash
    assert shuffled.outcome.result is PublishResult.SAME_MANIFEST
    assert shuffled.realization.id == plain.realization.id
    assert [r.id for r in reg.versions(pw.NAME)] == [plain.realization.id]
    loser = reg.find_by_request_id("req-shuffled")
    assert loser is not None and loser.state is S.ABANDONED


def test_failing_blocking_gate_fails_the_candidate(reg: Registry, store: LocalObjectStore) -> None:
    def gates(manifest, parts):  # type: ignore[no-untyped-def]
        return [GateResult("label_coverage", False, {"coverage": 0}), GateResult("drift_advisory", False, blocking=False)]

    with pytest.raises(PublicationError, match="label_coverage") as info:
        pw.build(reg, store, "req-gate", gates=gates)
    assert "drift_advisory" not in str(info.value)
    candidate = reg.find_by_request_id("req-gate")
    assert candidate is not None and candidate.state is S.FAILED
    assert reg.versions(pw.NAME) == []
    with pytest.raises(NotFoundError):
        reg.resolve(pw.NAME, pw.VERSION)
    assert candidate.manifest_hash is not None
    with pytest.raises(NotFoundError):
        reg.resolve(pw.NAME, pw.VERSION, manifest_hash=candidate.manifest_hash)


def test_two_parts_claiming_one_partition_are_refused(reg: Registry, store: LocalObjectStore) -> None:
    parts = pw.partitions()
    dup = [*parts, (parts[0][0], parts[1][1])]
    with pytest.raises(PublicationError, match="two parts claim partition"):
        pw.build(reg, store, "req-dup", parts=dup)
    candidate = reg.find_by_request_id("req-dup")
    assert candidate is not None and candidate.state is S.FAILED
    assert reg.versions(pw.NAME) == []
    with pytest.raises(NotFoundError):
        reg.resolve(pw.NAME, pw.VERSION)


def test_alias_moves_only_to_published_versions_by_cas(
    reg: Registry, store: LocalObjectStore, backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = pw.build(reg, store, "req-a1", logical_key="day-1")
    second = pw.build(reg, store, "req-a2", logical_key="day-2", parts=pw.partitions(seed=11))
    h1, h2 = first.manifest.manifest_hash, second.manifest.manifest_hash
    assert h1 != h2

    def failing(manifest, parts):  # type: ignore[no-untyped-def]
        return [GateResult("never", False)]

    with pytest.raises(PublicationError):
        pw.build(reg, store, "req-a3", logical_key="day-3", parts=pw.partitions(seed=13), gates=failing)
    failed = reg.find_by_request_id("req-a3")
    assert failed is not None and failed.manifest_hash is not None

    dsv = DsvCli(capsys, monkeypatch, {k: v for k, v in cli_env(tmp_path, backend_url).items() if k.startswith("DSV_")})  # in process
    ref = f"{pw.NAME}:{pw.VERSION}@production"
    for digest in (h1, h2):  # production is protected: approve first, as a release manager would
        approved = dsv("approve", f"{pw.NAME}:{pw.VERSION}@sha256:{digest}", "--reason", "reviewed")
        assert approved.code == 0, approved.err
    assert dsv("alias", "set", ref, h1).code == 0
    refused = dsv("alias", "set", ref, failed.manifest_hash, "--expect", h1)
    assert refused.code != 0 and refused.code in (2, 3)
    assert reg.get_alias(pw.NAME, pw.VERSION, "production").target == h1  # type: ignore[union-attr]
    moved = dsv("alias", "set", ref, h2, "--expect", h1)
    assert moved.code == 0, moved.err
    stale = dsv("alias", "set", ref, h1, "--expect", h1)
    assert stale.code == 2, stale
    assert stale.err.count("\n") == 1 and stale.err.startswith("dsv: error:")
    assert reg.get_alias(pw.NAME, pw.VERSION, "production").target == h2  # type: ignore[union-attr]
    hist = dsv("alias", "history", ref, "--json")
    assert hist.code == 0, hist.err
    moves = json.loads(hist.out)
    assert [(m["old_target"], m["new_target"]) for m in moves] == [(None, h1), (h1, h2)]
    assert [m["generation"] for m in moves] == sorted(m["generation"] for m in moves)
    assert len({m["generation"] for m in moves}) == 2
    # each successful move is audited in its own transaction; the refused and stale ones are not
    audit = dsv("audit", "--ref", ref, "--json")
    assert audit.code == 0, audit.err
    moved_in_audit = [(e["detail"]["from"], e["detail"]["to"]) for e in json.loads(audit.out) if e["action"] == "alias.move"]
    assert moved_in_audit == [(None, h1), (h1, h2)]
    assert reg.resolve(pw.NAME, pw.VERSION, alias="production").manifest_hash == h2


@pytest.mark.slow  # 8 racing processes per backend
@pytest.mark.parametrize("processes", [8])
def test_racing_publishers_one_winner(backend_url: str, tmp_path: Path, processes: int) -> None:
    with Registry.from_url(backend_url) as r:
        pw.register(r)
    forked.ensure_running()
    start = time.time() + 3  # every builder has forked and opened its registry by then: they publish together
    procs = [
        forked.Worker(pw.main, [backend_url, str(tmp_path / "objects"), f"race-{i}", "--logical-key", "2026-06-24", "--start-at", str(start)])
        for i in range(processes)
    ]
    outs = []
    for p in procs:
        code, out = p.communicate(timeout=240)
        assert code == 0, out[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    hashes = {o["manifest_hash"] for o in outs}
    assert len(hashes) == 1
    winners = [o for o in outs if o["outcome"] == "CREATED"]
    assert len(winners) == 1 and winners[0]["created"]
    assert sorted(o["outcome"] for o in outs if o is not winners[0]) == ["SAME_MANIFEST"] * (processes - 1)
    assert {o["realization_id"] for o in outs} == {winners[0]["realization_id"]}
    with Registry.from_url(backend_url) as r:
        published = r.versions(pw.NAME)
        assert [(x.id, x.state) for x in published] == [(winners[0]["realization_id"], S.PUBLISHED)]
        everything = r.versions(pw.NAME, include_candidates=True)
        assert len(everything) == processes
        losers = [x for x in everything if x.id != winners[0]["realization_id"]]
        assert all(x.state is S.ABANDONED for x in losers)
        for x in losers:
            last = r.events(x.id)[-1]
            assert last.to_state is S.ABANDONED and "same manifest" in last.reason
        assert r.resolve(pw.NAME, pw.VERSION).manifest_hash == hashes.pop()
