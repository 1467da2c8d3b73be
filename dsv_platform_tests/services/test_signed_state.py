"""Issue 24 item 4: state, approval, aliases and quarantine are signed events; an insider's UPDATE is UNTRUSTED at resolution.

On the real registries (SQLite and PostgreSQL): the platform publishes, approves and moves ``production`` as identities
that prove their keys; then an insider with database write access re-points ``production``, sets PUBLISHED to
ELIGIBLE, rolls a manifest or an alias back to an older validly signed one, and lifts a quarantine with one UPDATE.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from sqlalchemy import insert, update

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.quarantine import QuarantineRecords
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.trust import trust
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

S = RealizationState
BASE = f"{pw.NAME}:{pw.VERSION}"


def home_on(registry_url: str, home: Path) -> Settings:
    return replace(load_settings({"DSV_HOME": str(home)}), registry_url=registry_url)


@dataclass
class Published:
    platform: Platform
    old: Realization  # approved, production pointed here first
    current: Realization  # approved, production points here now
    unapproved: Realization  # PUBLISHED only

    def sql(self, stmt: object) -> None:
        """What the insider does: one statement, straight to the database."""
        with self.platform.registry.engine.begin() as conn:
            conn.execute(stmt)  # type: ignore[call-overload]


@pytest.fixture
def world(backend_url: str, tmp_path: Path) -> Iterator[Published]:
    with build_platform(home_on(backend_url, tmp_path / "home")) as p:
        trust.current_identity(p)  # admin: proves its key, and signs every event from here on
        reg, store = p.registry, LocalObjectStore(tmp_path / "objects")
        pw.register(reg)
        made = [pw.build(reg, store, f"req-{i}", logical_key=f"k{i}", parts=pw.partitions(seed=i)).realization for i in (1, 2, 3)]
        for r in made[:2]:
            approve(reg, r.ref, reason="reviewed", actor="admin")
        reg.set_alias(pw.NAME, pw.VERSION, "production", made[0].manifest_hash, expect=None, actor="admin", reason="first release")
        reg.set_alias(pw.NAME, pw.VERSION, "production", made[1].manifest_hash, expect=made[0].manifest_hash, actor="admin", reason="second release")
        old, current, unapproved = (reg.get(r.id) for r in made)
        yield Published(p, old, current, unapproved)


def refused(world: Published, ref: str, *names: str) -> UntrustedError:
    with pytest.raises(UntrustedError) as caught:
        world.platform.registry.resolve_ref(ref)
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))
    return caught.value


def test_honest_history_resolves(world: Published) -> None:
    reg = world.platform.registry
    assert reg.resolve_ref(f"{BASE}@production").manifest_hash == world.current.manifest_hash
    assert reg.resolve_ref(f"{BASE}@sha256:{world.old.manifest_hash}").state is S.ELIGIBLE
    assert reg.resolve_ref(BASE).id == world.unapproved.id, "the newest readable realization"
    with reg.engine.connect() as conn:
        signed = conn.execute(st.signed_events.select()).all()
    assert {r.signer for r in signed} == {"admin"} and {r.kind for r in signed} == {"state", "alias"}


def test_repointing_production_at_an_unapproved_realization_is_untrusted(world: Published) -> None:
    a = s.aliases
    world.sql(update(a).where(a.c.alias == "production").values(target_manifest_hash=world.unapproved.manifest_hash, generation=a.c.generation + 1))
    refused(world, f"{BASE}@production", "alias 'production'", world.unapproved.manifest_hash, "newest move #")


def test_eligible_without_an_approval_then_a_protected_alias_move_is_untrusted(world: Published) -> None:
    r = s.realizations
    ref = f"{BASE}@sha256:{world.unapproved.manifest_hash}"
    world.sql(update(r).where(r.c.id == world.unapproved.id).values(state=S.ELIGIBLE.value))
    refused(world, ref, "the registry says ELIGIBLE", "state event #", "says PUBLISHED")
    reg = world.platform.registry  # the protected alias cannot move onto it through the front door either
    with pytest.raises(UntrustedError, match="the registry says ELIGIBLE"):
        reg.set_alias(pw.NAME, pw.VERSION, "production", world.unapproved.manifest_hash, expect=world.current.manifest_hash, actor="admin", reason="x")
    assert reg.get_alias(pw.NAME, pw.VERSION, "production").target == world.current.manifest_hash  # type: ignore[union-attr]
    refused(world, BASE, "the registry says ELIGIBLE")


def test_a_forged_approval_event_is_untrusted(world: Published) -> None:
    e = s.realization_events
    world.sql(update(s.realizations).where(s.realizations.c.id == world.unapproved.id).values(state=S.ELIGIBLE.value))
    forged = {"from_state": "PUBLISHED", "to_state": "ELIGIBLE", "reason": "ok", "actor": "admin", "at": world.current.state_changed_at}
    world.sql(insert(e).values(realization_id=world.unapproved.id, **forged))
    refused(world, f"{BASE}@sha256:{world.unapproved.manifest_hash}", "PUBLISHED -> ELIGIBLE", "is not signed")


def test_rolling_a_manifest_back_to_an_older_validly_signed_one_is_untrusted(world: Published) -> None:
    r = s.realizations  # the current row now names the old manifest (which its signature and envelope are valid for)
    world.sql(update(r).where(r.c.id == world.current.id).values(manifest_hash=world.old.manifest_hash))
    refused(world, f"{BASE}@sha256:{world.current.manifest_hash}", "is not what 'admin' signed")


def test_rolling_production_back_to_its_older_signed_move_is_untrusted(world: Published) -> None:
    a = s.aliases
    world.sql(update(a).where(a.c.alias == "production").values(target_manifest_hash=world.old.manifest_hash, generation=1))
    refused(world, f"{BASE}@production", "alias 'production'", "generation 1", "newest move #")


def test_lifting_a_quarantine_with_one_update_is_untrusted(world: Published) -> None:
    quarantines = QuarantineRecords(world.platform.registry.engine)
    mh = world.current.manifest_hash
    node = {"node": f"realization:{mh}", "kind": "realization", "id": mh, "depth": 0}
    quarantines.create("realization", mh, world.current.ref, reason="poisoning suspected", actor="admin", evidence={}, affected=[node])
    world.sql(update(s.realizations).where(s.realizations.c.id == world.current.id).values(state=S.ELIGIBLE.value))
    refused(world, f"{BASE}@production", "the registry says ELIGIBLE", "-> QUARANTINED", "says QUARANTINED")


def test_resolve_verify_and_audit_verify_exit_13_naming_the_event(
    world: Published, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = world.platform.settings
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(settings.home), "DSV_REGISTRY_URL": settings.registry_url})
    clean = dsv("audit", "--verify")
    assert clean.code == 0 and "signed state of 3 realization(s) and 1 alias(es) verifies" in clean.out, clean
    a = s.aliases
    world.sql(update(a).where(a.c.alias == "production").values(target_manifest_hash=world.unapproved.manifest_hash, generation=a.c.generation + 1))
    for args in (("resolve", f"{BASE}@production"), ("verify", f"{BASE}@production"), ("audit", "--verify")):
        done = dsv(*args)
        assert done.code == 13, (args, done)
        assert "alias 'production'" in done.err and "newest move #" in done.err, (args, done)
