"""Issue 16 parts 1 and 6: identities with keys, grants, the bootstrap admin, separation of duties, the hash-chained audit log.

On the real registries (SQLite and PostgreSQL); the audit log is tampered with directly in the database
(its append-only trigger dropped or disabled first, as someone with database access could) and
``dsv audit --verify`` names the entry.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import text

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.trust import TrustRecords
from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust.trust import Grant, Role, verify_chain
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization import build_realization
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.trust import gatekeeper
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.scenarios.support import World, definition
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


def settings_for(home: Path, url: str | None = None, **env: str) -> Settings:
    base = load_settings({"DSV_HOME": str(home), **env})
    return replace(base, registry_url=url) if url else base


def test_bootstrap_admin_holds_every_role_with_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    with build_platform(settings_for(tmp_path)) as p:
        me = trust.current_identity(p)
        assert me.name == "admin" and me.fingerprint.startswith("ed25519:sha256:")
        assert {g.role for g in trust.grants_of(p, "admin")} == set(Role)
        key = tmp_path / "identities" / "admin.key"
        assert key.stat().st_mode & 0o777 == 0o600
        assert trust.public_key_of(p, "admin") == me.public_key
        signature = trust.sign_bytes(p, b"manifest")
        assert trust.verify_signature(me.public_key, signature, b"manifest")
        assert not trust.verify_signature(me.public_key, signature, b"another manifest")
        entries = trust.records(p).audit_entries()
        assert [e["action"] for e in entries] == ["grant.add"] * len(Role) and verify_chain(entries) == []
    with build_platform(settings_for(tmp_path)) as again:  # the second use bootstraps nothing
        assert trust.current_identity(again).public_key == me.public_key
        assert len(trust.records(again).audit_entries()) == len(Role)


def test_an_identity_is_proven_by_its_private_key(tmp_path: Path) -> None:
    with build_platform(settings_for(tmp_path)) as p:
        trust.create_identity(p, "alice", by="admin")
    with build_platform(settings_for(tmp_path, DSV_IDENTITY="alice")) as alice:
        assert trust.current_identity(alice).name == "alice"
        with pytest.raises(AccessDeniedError, match="'alice' has no grant for role 'builder'"):
            trust.require(alice, Role.BUILDER, definition="fraud_training_set:v6")
    other_keys = tmp_path / "elsewhere"
    with (
        build_platform(settings_for(tmp_path, DSV_IDENTITY="alice", DSV_KEY_DIR=str(other_keys))) as stranger,
        pytest.raises(AccessDeniedError, match=r"no private key at .*elsewhere/alice.key"),
    ):
        trust.current_identity(stranger)
    (tmp_path / "identities" / "alice.key").unlink()
    with build_platform(settings_for(tmp_path)) as p:
        trust.create_identity(p, "mallory", by="admin")
    os.link(tmp_path / "identities" / "mallory.key", tmp_path / "identities" / "alice.key")  # someone else's key under alice's name
    with build_platform(settings_for(tmp_path, DSV_IDENTITY="alice")) as forged, pytest.raises(AccessDeniedError, match="does not match the registered"):
        trust.current_identity(forged)
    with build_platform(settings_for(tmp_path, DSV_IDENTITY="nobody")) as unknown, pytest.raises(AccessDeniedError, match="'nobody' is not registered"):
        trust.current_identity(unknown)


def test_a_strict_home_bootstraps_nobody(tmp_path: Path) -> None:
    with build_platform(settings_for(tmp_path, DSV_STRICT="1")) as p:
        with pytest.raises(AccessDeniedError, match="strict home needs an identity"):
            trust.current_identity(p)
        assert trust.records(p).identities() == []
    with build_platform(settings_for(tmp_path)) as p:
        trust.mark_strict(p)
    with build_platform(settings_for(tmp_path, DSV_IDENTITY="admin")) as p, pytest.raises(AccessDeniedError, match="'admin' is not registered"):
        trust.current_identity(p)


def test_grant_scopes(tmp_path: Path) -> None:
    with build_platform(settings_for(tmp_path)) as p:
        trust.current_identity(p)  # the registry's first identity is its bootstrap admin (as `dsv identity create` does first)
        trust.create_identity(p, "writer", by="admin")
        for grant in (
            Grant("writer", Role.SOURCE_WRITER, source="transactions"),
            Grant("writer", Role.CONSUMER, definition="fraud_training_set:v6", purpose="fraud"),
        ):
            assert trust.change_grant(p, grant, add=True, reason="test")
        assert not trust.change_grant(p, Grant("writer", Role.SOURCE_WRITER, source="transactions"), add=True)  # nothing changed: not audited
        check = lambda role, **scope: trust.require(p, role, identity="writer", **scope)  # noqa: E731
        assert check(Role.SOURCE_WRITER, source="transactions").source == "transactions"
        with pytest.raises(AccessDeniedError, match="'writer' has no grant for role 'source_writer' on source=chargebacks"):
            check(Role.SOURCE_WRITER, source="chargebacks")
        assert check(Role.CONSUMER, definition="fraud_training_set:v6@sha256:" + "a" * 64, purpose="fraud")
        for scope in ({"definition": "fraud_training_set:v5", "purpose": "fraud"}, {"definition": "fraud_training_set:v6", "purpose": "marketing"}):
            with pytest.raises(AccessDeniedError, match="role 'consumer'"):
                check(Role.CONSUMER, **scope)
        assert trust.change_grant(p, Grant("writer", Role.SOURCE_WRITER, source="transactions"), add=False, reason="rotated")
        with pytest.raises(AccessDeniedError):
            check(Role.SOURCE_WRITER, source="transactions")
        actions = [(e["identity"], e["action"], e["target"], e["reason"]) for e in trust.records(p).audit_entries()][len(Role) :]
        assert actions == [
            ("admin", "grant.add", "identity:writer", "test"),
            ("admin", "grant.add", "identity:writer", "test"),
            ("admin", "grant.remove", "identity:writer", "rotated"),
        ]
    with (
        build_platform(settings_for(tmp_path, DSV_IDENTITY="writer")) as w,
        pytest.raises(AccessDeniedError, match="'writer' has no grant for role 'operator'"),
    ):
        trust.change_grant(w, Grant("writer", Role.PUBLISHER), add=True)  # nobody grants itself


def test_audit_appends_are_serialized_and_chained(backend_url: str, tmp_path: Path) -> None:
    with Registry.from_url(backend_url) as reg:
        records = TrustRecords.of(reg)

        def append(worker: int) -> None:
            for i in range(8):
                records.audit(identity=f"w{worker}", action="publish", target=f"set:v1@sha256:{worker:02d}{i:062d}", reason=None)

        threads = [threading.Thread(target=append, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        entries = records.audit_entries()
        assert [e["seq"] for e in entries] == list(range(1, 33)) and verify_chain(entries) == []
        assert len(records.audit_entries(target="set:v1@sha256:03" + "0" * 61 + "5")) == 1
        with pytest.raises(Exception, match="append-only"), reg.engine.begin() as conn:
            conn.execute(text("UPDATE audit_log SET reason = 'x' WHERE seq = 3"))
        with pytest.raises(Exception, match="append-only"), reg.engine.begin() as conn:
            conn.execute(text("DELETE FROM audit_log WHERE seq = 3"))


def _tamper(reg: Registry, sql: str) -> None:
    """Edit the audit log as someone with database access could: the append-only trigger first."""
    with reg.engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER audit_log_no_update"))
            conn.execute(text("DROP TRIGGER audit_log_no_delete"))
        else:
            conn.execute(text("ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only"))
        conn.execute(text(sql))


@pytest.mark.parametrize("edit", ["update", "delete"])
def test_audit_verify_names_an_entry_edited_in_the_database(
    backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    monkeypatch.setenv("DSV_HOME", str(tmp_path))
    monkeypatch.setenv("DSV_REGISTRY_URL", backend_url)
    with build_platform(load_settings()) as p:
        for i in range(3):
            trust.audit(p, "publish", f"set:v1@sha256:{i:064d}", reason=f"build {i}")
    assert main(["audit", "--verify"]) == 0
    assert f"audit log verifies: {len(Role) + 3} entries" in capsys.readouterr().out
    assert main(["audit", "--ref", "set:v1"]) == 0
    assert capsys.readouterr().out.count("publish") == 3
    seq = len(Role) + 2
    with Registry.from_url(backend_url) as reg:
        _tamper(reg, f"UPDATE audit_log SET reason = 'nothing to see' WHERE seq = {seq}" if edit == "update" else f"DELETE FROM audit_log WHERE seq = {seq}")
    assert main(["audit", "--verify"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    if edit == "update":
        assert f"audit entry {seq}: entry_hash" in err and "altered" in err, err
    else:
        assert f"audit entry {seq + 1}: sequence gap: expected {seq}" in err, err


def _strict_team(home: Path) -> dict[str, Settings]:
    """A strict home: operator ``boss`` (as ``dsv init --strict`` makes it) grants bob builder, pub builder+publisher+approver, dave auditor."""
    settings = {name: settings_for(home, DSV_STRICT="1", DSV_IDENTITY=name) for name in ("boss", "bob", "pub", "dave")}
    with build_platform(settings["boss"]) as p:
        trust.create_identity(p, "boss", by="boss")
        trust.records(p).change_grant(Grant("boss", Role.OPERATOR), add=True, by="boss")
        for name, roles in (("bob", [Role.BUILDER]), ("pub", [Role.BUILDER, Role.PUBLISHER, Role.APPROVER]), ("dave", [Role.AUDITOR])):
            trust.create_identity(p, name, by="boss")
            for role in roles:
                trust.change_grant(p, Grant(name, role, definition="fraud_training_set"), add=True)
    return settings


def test_strict_builder_writes_only_staging_publisher_publishes_auditor_reads_no_data(tmp_path: Path) -> None:
    team = _strict_team(tmp_path)
    world = World.create(settings=team["boss"])  # lands and loads the sources (the landing adapter, no grant needed here)
    world.platform.close()
    with build_platform(team["bob"]) as bob, pytest.raises(AccessDeniedError, match="'bob' has no grant for role 'publisher'"):
        build_realization(bob, definition("v6"))
    with build_platform(team["bob"]) as bob:
        (candidate,) = bob.registry.versions("fraud_training_set", include_candidates=True)
        assert candidate.state is RealizationState.SEALED and trust.builder_of(bob, candidate.id) == "bob"  # staging only: nothing public
        with pytest.raises(AccessDeniedError, match="role 'approver'"):
            approve(bob.registry, candidate.ref, reason="mine", actor="bob", gate=gatekeeper(bob))
    with build_platform(team["pub"]) as pub:
        built = build_realization(pub, definition("v6"))  # the same pinned inputs: publishes bob's sealed candidate
        published = pub.registry.find_by_manifest_hash(built.manifest.manifest_hash)
        assert published is not None and published.state is RealizationState.PUBLISHED and trust.builder_of(pub, published.id) == "bob"
        done = approve(pub.registry, built.ref, reason="report reviewed", actor="pub", gate=gatekeeper(pub))  # pub did not build it
        assert done.realization.state is RealizationState.ELIGIBLE
    with build_platform(team["dave"]) as dave:
        with pytest.raises(AccessDeniedError, match=r"'dave'.*'consumer'"):
            open_dataset(dave, built.ref)
        trail = [(e["identity"], e["action"]) for e in trust.records(dave).audit_entries(target="fraud_training_set:v6")]
        assert trail == [("pub", "publish"), ("pub", "alias.move"), ("pub", "approve")]
        assert verify_chain(trust.records(dave).audit_entries()) == []
