"""Approval, revocation and protected aliases on SQLite and PostgreSQL (docs/publication.md, "Approval and protected aliases")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import aliases as al
from dsv_platform.adapters.registry import approval as ap
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ConfigurationError, PublicationError
from dsv_platform.core.publication.approval import ApprovalStateError, ProtectedAliasError
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.publication.approval import approval_metadata, approve, revoke
from dsv_platform.services.publication.publisher import BuildResult, Publisher
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

S = RealizationState
BASE = f"{pw.NAME}:{pw.VERSION}"


@pytest.fixture
def reg(backend_url: str) -> Iterator[Registry]:
    r = Registry.from_url(backend_url)
    pw.register(r)
    yield r
    r.close()


@pytest.fixture
def store(tmp_path: Path) -> LocalObjectStore:
    return LocalObjectStore(tmp_path / "objects")


def built(reg: Registry, store: LocalObjectStore, tag: str, seed: int) -> BuildResult:
    return pw.build(reg, store, f"req-{tag}", logical_key=tag, parts=pw.partitions(seed=seed))


def test_approve_then_revoke_are_events_with_actor_and_reason(reg: Registry, store: LocalObjectStore) -> None:
    ref = built(reg, store, "a", 3).realization.ref
    done = approve(reg, ref, reason="  reviewed the quality report  ", actor="alice")
    assert done.changed and done.realization.state is S.ELIGIBLE and done.reason == "reviewed the quality report"
    last = reg.events(done.realization.id)[-1]
    assert (last.from_state, last.to_state, last.actor, last.reason) == (S.PUBLISHED, S.ELIGIBLE, "alice", "reviewed the quality report")
    assert approval_metadata(reg, done.realization) | {"approved_at": None} == {
        "state": "ELIGIBLE",
        "approved_by": "alice",
        "approval_reason": "reviewed the quality report",
        "approved_at": None,
    }
    again = approve(reg, ref, reason="twice", actor="bob")
    assert not again.changed and "already ELIGIBLE" in again.note and "alice" in again.note
    assert len(reg.events(done.realization.id)) == 4, "an idempotent approval records nothing"

    gone = revoke(reg, ref, reason="label leak found", actor="carol")
    assert gone.changed and gone.realization.state is S.PUBLISHED
    last = reg.events(done.realization.id)[-1]
    assert (last.from_state, last.to_state, last.actor, last.reason) == (S.ELIGIBLE, S.PUBLISHED, "carol", "label leak found")
    assert approval_metadata(reg, gone.realization)["approved_by"] is None
    assert not revoke(reg, ref, reason="again", actor="carol").changed
    assert reg.resolve_ref(ref).state is S.PUBLISHED, "a revoked realization stays readable"


def test_approval_needs_a_reason(reg: Registry, store: LocalObjectStore) -> None:
    ref = built(reg, store, "a", 3).realization.ref
    for bad in ("", "   "):
        with pytest.raises(ConfigurationError, match="--reason"):
            approve(reg, ref, reason=bad, actor="alice")
    assert reg.resolve_ref(ref).state is S.PUBLISHED


def test_only_a_published_realization_can_be_approved(reg: Registry, store: LocalObjectStore) -> None:
    def never(manifest, parts):  # type: ignore[no-untyped-def]
        return [GateResult("never", False)]

    with pytest.raises(PublicationError):
        pw.build(reg, store, "req-f", logical_key="f", parts=pw.partitions(seed=1), gates=never)
    failed = reg.find_by_request_id("req-f")
    assert failed is not None and failed.state is S.FAILED
    victims = {state: built(reg, store, state.value, seed).realization for state, seed in [(S.QUARANTINED, 3), (S.REDACTED, 5), (S.EXPIRED, 7)]}
    for state, r in victims.items():
        reg.transition(r.id, state, reason="tests", actor="tests")
    for r in [failed, *victims.values()]:
        before = len(reg.events(r.id))
        with pytest.raises(ApprovalStateError) as err:
            approve(reg, f"{BASE}@sha256:{r.manifest_hash}", reason="looks fine", actor="alice")
        assert reg.get(r.id).state.value in str(err.value) and err.value.exit_code == 15
        assert len(reg.events(r.id)) == before, "a refusal records nothing"
    with pytest.raises(ApprovalStateError, match="QUARANTINED"):
        revoke(reg, f"{BASE}@sha256:{victims[S.QUARANTINED].manifest_hash}", reason="x", actor="alice")


def test_a_protected_alias_moves_only_to_an_eligible_realization(reg: Registry, store: LocalObjectStore) -> None:
    first, second = built(reg, store, "a", 3).realization, built(reg, store, "b", 5).realization
    assert first.manifest_hash and second.manifest_hash
    with pytest.raises(ProtectedAliasError) as err:
        reg.set_alias(pw.NAME, pw.VERSION, "production", first.manifest_hash, expect=None, actor="ops")
    assert "'production'" in str(err.value) and first.ref in str(err.value) and "PUBLISHED" in str(err.value) and err.value.exit_code == 16
    assert reg.get_alias(pw.NAME, pw.VERSION, "production") is None
    assert reg.set_alias(pw.NAME, pw.VERSION, "candidate", first.manifest_hash, expect=None, actor="ops").generation == 1, "not protected: free"

    approve(reg, first.ref, reason="ok", actor="alice")
    assert reg.set_alias(pw.NAME, pw.VERSION, "production", first.manifest_hash, expect=None, actor="ops").target == first.manifest_hash
    with pytest.raises(ProtectedAliasError):
        Publisher(reg, store, actor="ops").move_alias(second, "production")  # every path goes through the registry's CAS
    assert reg.get_alias(pw.NAME, pw.VERSION, "production").target == first.manifest_hash  # type: ignore[union-attr]
    approve(reg, second.ref, reason="ok too", actor="alice")
    Publisher(reg, store, actor="ops").move_alias(reg.get(second.id), "production")
    assert reg.resolve(pw.NAME, pw.VERSION, alias="production").id == second.id


def test_building_straight_into_a_protected_alias_publishes_but_does_not_move_it(reg: Registry, store: LocalObjectStore) -> None:
    with pytest.raises(ProtectedAliasError, match="production"):
        Publisher(reg, store, actor="builder").build(pw.request("req-p", alias="production"))
    published = reg.find_by_request_id("req-p")
    assert published is not None and published.state is S.PUBLISHED
    assert reg.get_alias(pw.NAME, pw.VERSION, "production") is None


def test_revoke_is_refused_while_a_protected_alias_points_at_it_unless_forced(reg: Registry, store: LocalObjectStore) -> None:
    r = built(reg, store, "a", 3).realization
    assert r.manifest_hash
    approve(reg, r.ref, reason="ok", actor="alice")
    reg.set_alias(pw.NAME, pw.VERSION, "production", r.manifest_hash, expect=None, actor="ops")
    events = len(reg.events(r.id))
    with pytest.raises(ProtectedAliasError) as err:
        revoke(reg, f"{BASE}@production", reason="bad labels", actor="carol")
    assert "production" in str(err.value) and "--force" in str(err.value)
    assert reg.get(r.id).state is S.ELIGIBLE and len(reg.events(r.id)) == events, "the refused revocation rolled back"
    forced = revoke(reg, f"{BASE}@production", reason="bad labels", actor="carol", force=True)
    assert forced.changed and forced.protected_aliases == ("production",) and reg.get(r.id).state is S.PUBLISHED
    last = reg.events(r.id)[-1]
    assert last.actor == "carol" and last.reason.startswith("bad labels") and "forced" in last.reason and "production" in last.reason
    assert reg.get_alias(pw.NAME, pw.VERSION, "production").target == r.manifest_hash  # type: ignore[union-attr]


def test_the_protected_list_is_configurable(backend_url: str, store: LocalObjectStore) -> None:
    with Registry.from_url(backend_url, protected_aliases=("prod", "gold")) as reg:
        pw.register(reg)
        r = built(reg, store, "a", 3).realization
        assert r.manifest_hash
        assert reg.set_alias(pw.NAME, pw.VERSION, "production", r.manifest_hash, expect=None, actor="ops").generation == 1
        for name in ("prod", "gold"):
            with pytest.raises(ProtectedAliasError, match=name):
                reg.set_alias(pw.NAME, pw.VERSION, name, r.manifest_hash, expect=None, actor="ops")
        approve(reg, r.ref, reason="ok", actor="alice")
        assert reg.set_alias(pw.NAME, pw.VERSION, "gold", r.manifest_hash, expect=None, actor="ops").target == r.manifest_hash


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def _waits(reg: Registry, thread: threading.Thread, began: threading.Event) -> bool:
    """``thread``, whose first statement ``began``, waits for the open write transaction: on PostgreSQL a backend of this
    database waits on a lock (pg_stat_activity, read anew each poll); SQLite shows no waiting writer, so its statement
    has begun and not finished half a second later."""
    assert began.wait(timeout=30), "the second transaction never ran a statement"
    if reg.engine.dialect.name != "postgresql":
        thread.join(timeout=0.5)
        return thread.is_alive()
    waiting = sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
    with reg.engine.connect() as probe:
        for _ in range(3000):
            if probe.execute(waiting).scalar():
                return True
            probe.rollback()  # a new transaction: a fresh statistics snapshot
            if not thread.is_alive():
                return False
            thread.join(timeout=0.01)
    return False


def _blocked_until_commit(reg: Registry, first: Callable[..., object], second: Callable[[], object]) -> list[BaseException]:
    """Run ``first(conn)`` in an open write transaction, start ``second`` in another connection, check it waits, then commit."""
    began = threading.Event()

    def statement(*_: object) -> None:
        if threading.current_thread() is not threading.main_thread():
            began.set()

    sa.event.listen(reg.engine, "before_cursor_execute", statement)
    try:
        with reg.engine.connect() as conn:
            conn.execution_options(dsv_write=True)
            with conn.begin():
                first(conn)
                thread, errors = _in_thread(second)
                assert _waits(reg, thread, began), "the second transaction did not wait for the first"
    finally:
        sa.event.remove(reg.engine, "before_cursor_execute", statement)
    thread.join(timeout=60)
    assert not thread.is_alive()
    return errors


def test_a_revoke_racing_a_move_of_production_cannot_leave_it_on_a_published_realization(reg: Registry, store: LocalObjectStore) -> None:
    r = built(reg, store, "a", 3).realization
    assert r.manifest_hash
    approve(reg, r.ref, reason="ok", actor="alice")
    now = reg._now()

    def move(conn):  # type: ignore[no-untyped-def]
        al.set_alias(conn, pw.NAME, pw.VERSION, "production", r.manifest_hash, expect=None, actor="ops", reason="", now=now, protected={"production"})

    errors = _blocked_until_commit(reg, move, lambda: reg.revoke(r.id, reason="racing", actor="carol"))
    assert len(errors) == 1 and isinstance(errors[0], ProtectedAliasError), errors  # the revoke saw the committed move
    assert reg.get(r.id).state is S.ELIGIBLE

    def revoke_now(conn):  # type: ignore[no-untyped-def]
        ap.revoke(conn, r.id, reason="racing", actor="carol", now=now, protected={"production"}, force=True)

    other = built(reg, store, "b", 5).realization
    assert other.manifest_hash
    approve(reg, other.ref, reason="ok", actor="alice")
    reg.set_alias(pw.NAME, pw.VERSION, "production", other.manifest_hash, expect=r.manifest_hash, actor="ops")
    errors = _blocked_until_commit(
        reg, revoke_now, lambda: reg.set_alias(pw.NAME, pw.VERSION, "production", r.manifest_hash, expect=other.manifest_hash, actor="ops")
    )
    assert len(errors) == 1 and isinstance(errors[0], ProtectedAliasError) and "PUBLISHED" in str(errors[0]), errors  # the state re-read in the CAS
    assert reg.get(r.id).state is S.PUBLISHED and reg.get_alias(pw.NAME, pw.VERSION, "production").target == other.manifest_hash  # type: ignore[union-attr]
