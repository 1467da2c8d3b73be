"""Issue 25 item 2: a privacy deletion SIGKILLed in its canonical stage is finished by a rerun or by `dsv privacy reconcile`.

The real `dsv privacy delete` runs in a subprocess that kills itself right after
the first row-level delete of a canonical table commits (kill_worker.py, step
``canonical``). Then the same command, or `dsv privacy reconcile` (which never
sees the subject's key), must finish every stage: the request completes only
with an outcome for every planned descendant, and no snapshot of any canonical
table still holds the subject (time travel reads nothing of it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.expressions import EqualTo

from dsv_platform import open_dataset
from dsv_platform.core.privacy.privacy import DescendantKind
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services import kill_support as ks

pytestmark = pytest.mark.slow

SUBJECT_TABLES = [spec for spec in SOURCES.values() if spec.entity == "account_id"]
REQUEST = "del-canonical"


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    base = {"DSV_HOME": str(tmp_path / "home"), "DSV_ACTOR": "ops"}
    if request.param == "postgres":
        base["DSV_REGISTRY_URL"] = str(request.getfixturevalue("postgres_url"))
    return base


def world_with_two_builds(env: dict[str, str]) -> str:
    """Three days landed, a v6 build, a fourth day, another v6 build; a subject both builds hold."""
    world = World.create(settings=load_settings(env), days=3)
    first = world.build("v6")
    fourth = world.domain.days(4)[-1]
    world.ingest([daily_batch(world.domain, s, fourth) for s in SOURCES])
    world.build("v6")
    subject = str(open_dataset(first.ref, settings=world.settings).to_arrow().column("account_id")[0])
    world.platform.close()
    return subject


def holding_snapshots(env: dict[str, str], subject: str) -> dict[str, list[int]]:
    with ks.platform(env) as p:
        return {spec.name: p.tables.snapshots_matching(spec, EqualTo("account_id", subject)) for spec in SUBJECT_TABLES}


@pytest.mark.parametrize("finish", ["rerun", "reconcile"])
def test_a_deletion_killed_in_its_canonical_stage_is_finished(env: dict[str, str], finish: str, monkeypatch: pytest.MonkeyPatch) -> None:
    subject = world_with_two_builds(env)
    delete = ("--subject", subject, "--reason", "GDPR art. 17 request #25", "--request-id", REQUEST)
    ks.run_killed(env, "privacy", "canonical", "--", *delete)

    holding = holding_snapshots(env, subject)
    with ks.platform(env) as p:  # killed where the issue says: gone from a current snapshot, still in older ones
        current = {spec.name: p.tables.count_matching(spec, "account_id", subject) for spec in SUBJECT_TABLES}
        status = build_coordinator(p).status(subject)
    assert any(current[name] == 0 and holding[name] for name in current), (current, holding)
    assert [r["completed"] for r in status["requests"]] == [False]
    assert "canonical_rows" not in {o["kind"] for o in status["outcomes"]}

    argv = ("privacy", "delete", *delete) if finish == "rerun" else ("privacy", "reconcile")
    assert ks.rerun(monkeypatch, env, *argv) == 0

    with ks.platform(env) as p:
        coordinator = build_coordinator(p)
        status = coordinator.status(subject)
        assert [(r["request_id"], r["completed"]) for r in status["requests"]] == [(REQUEST, True)]
        finished = {o["id"] for o in status["outcomes"] if o["kind"] == "canonical_rows"}
        assert finished == {p.tables.identifier(spec) for spec in SUBJECT_TABLES if holding[spec.name]}, finished  # main: none (33 of 34)
        planned = p.registry.privacy.planned(REQUEST)
        assert {(d.descendant.kind.value, d.descendant.id) for d in planned} == {(o["kind"], o["id"]) for o in status["outcomes"]}
        canonical = {d.descendant.id for d in planned if d.descendant.kind is DescendantKind.CANONICAL_ROWS}
        assert canonical == {p.tables.identifier(spec) for spec in SUBJECT_TABLES if holding[spec.name]} and canonical
        assert status["registry_generation"] == status["key_store_generation"] == 1
        audited = [e for e in trust.records(p).audit_entries() if e["action"] == "privacy.delete"]
        assert [e["detail"]["request_id"] for e in audited] == [REQUEST], audited
        assert sum(p.tables.count_matching(spec, "account_id", subject) for spec in SUBJECT_TABLES) == 0
    assert holding_snapshots(env, subject) == {spec.name: [] for spec in SUBJECT_TABLES}  # nothing left to time-travel to


def test_a_reconcile_that_cannot_finish_stops_and_keeps_reads_refused(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: a staged part only the subject's key can judge, no canonical table to find the key in, and reconcile never sees it."""
    ks.seed_world(env)  # realizations only (no canonical tables)
    ks.run_killed(env, "privacy", "outcome", "--", *ks.DELETE)
    with ks.platform(env) as p:
        p.store.stage("c999-killed", "part.parquet", b"a part a killed build left")

    assert ks.rerun(monkeypatch, env, "privacy", "reconcile") == 1  # PrivacyIncompleteError: names the request to rerun
    with ks.platform(env) as p:
        assert [r.completed for r in p.registry.privacy.requests()] == [False]
        assert p.store.keys.generation() == 0 < p.registry.redaction_generation()  # reads stay refused

    assert ks.rerun(monkeypatch, env, "privacy", "delete", *ks.DELETE) == 0
    with ks.platform(env) as p:
        assert [r.completed for r in p.registry.privacy.requests()] == [True]
        assert p.store.keys.generation() == p.registry.redaction_generation() == 1
