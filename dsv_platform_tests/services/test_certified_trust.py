"""Issue 24 item 3: identity keys and grants count only with an operator's certificate chaining to a root pinned outside the registry.

On the real registries (SQLite and PostgreSQL): the team's home bootstraps ``admin`` (its key becomes the home's pinned
root), an operator creates ``bob`` and grants him ``publisher``; then an insider with database write access swaps bob's
key row for their own key, and adds or widens a grant. Each is refused, naming the row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import insert, update

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.certificates import ROOT_FILE
from dsv_platform.adapters.registry.trust import scope_key
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import AccessDeniedError, EnvironmentSetupError, UntrustedError
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.services.trust import trust
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


def home_on(registry_url: str, home: Path, **env: str) -> Settings:
    return replace(load_settings({"DSV_HOME": str(home), **env}), registry_url=registry_url)


@dataclass
class Team:
    url: str
    home: Path
    root: str  # the admin's public key, hex: what the team pins (DSV_TRUST_ROOT)
    tmp: Path

    def sql(self, stmt: object) -> None:
        with build_platform(home_on(self.url, self.home)) as p, p.registry.engine.begin() as conn:
            conn.execute(stmt)  # type: ignore[call-overload]

    def as_(self, name: str, home: Path | None = None) -> Settings:
        return home_on(self.url, home or self.home, DSV_IDENTITY=name, DSV_TRUST_ROOT=self.root)


@pytest.fixture
def team(backend_url: str, tmp_path: Path) -> Iterator[Team]:
    home = tmp_path / "team"
    with build_platform(home_on(backend_url, home)) as p:
        admin = trust.current_identity(p)
        trust.create_identity(p, "bob", by=admin.name)
        trust.change_grant(p, Grant("bob", Role.PUBLISHER, definition="txn_protocol"), add=True, reason="owns the protocol")
    pinned = (home / ROOT_FILE).read_text().strip()
    assert pinned == admin.public_key.hex(), "the bootstrap identity's key is the home's pinned root"
    yield Team(backend_url, home, pinned, tmp_path)


def test_certified_keys_and_grants_work_under_the_pinned_root(team: Team) -> None:
    with build_platform(team.as_("bob")) as p:
        assert trust.current_identity(p).name == "bob"
        assert trust.require(p, Role.PUBLISHER, definition="txn_protocol:v1").role is Role.PUBLISHER
        with pytest.raises(AccessDeniedError, match="'bob'"):
            trust.require(p, Role.OPERATOR)
    with build_platform(home_on(team.url, team.home)) as p, p.registry.engine.connect() as conn:
        kinds = sorted({(r.kind, r.certifier) for r in conn.execute(st.certificates.select())})
    assert kinds == [("grant", "admin"), ("key", "admin")]


def test_a_swapped_key_row_is_refused_naming_the_identity(team: Team) -> None:
    mallory = Ed25519PrivateKey.generate()  # the insider's own key, filed as bob's in their own key folder
    folder = team.tmp / "mallory" / "identities"
    folder.mkdir(parents=True)
    pem = mallory.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (folder / "bob.key").write_bytes(pem)
    raw = mallory.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    team.sql(update(st.identities).where(st.identities.c.name == "bob").values(public_key=raw.hex(), fingerprint=trust.fingerprint(raw)))
    with build_platform(team.as_("bob", team.tmp / "mallory")) as p, pytest.raises(UntrustedError, match="identity 'bob': its public key"):
        trust.current_identity(p)
    with build_platform(team.as_("admin")) as p, pytest.raises(UntrustedError, match="identity 'bob'"):
        trust.public_key_of(p, "bob")  # what signature checks read: refused too


def test_an_inserted_grant_is_refused_naming_it(team: Team) -> None:
    grant = Grant("bob", Role.OPERATOR)
    row = {"scope_key": scope_key(grant), "identity": "bob", "role": "operator", "columns_json": "[]", "created_by": "admin"}
    with build_platform(team.as_("admin")) as p:
        at = trust.records(p).identities()[0].created_at
    team.sql(insert(st.grants).values(created_at=at, **row))
    with build_platform(team.as_("bob")) as p, pytest.raises(UntrustedError, match="grant operator any of identity 'bob'"):
        trust.require(p, Role.OPERATOR)


def test_a_widened_grant_is_refused_naming_it(team: Team) -> None:
    g = st.grants
    team.sql(update(g).where(g.c.identity == "bob").values(definition=None))  # publisher of txn_protocol -> of everything
    with build_platform(team.as_("bob")) as p, pytest.raises(UntrustedError, match="grant publisher any of identity 'bob'"):
        trust.require(p, Role.PUBLISHER, definition="fraud_training_set:v6")


def test_state_signed_by_a_swapped_key_is_untrusted(team: Team) -> None:
    with build_platform(team.as_("admin")) as p:
        pw.register(p.registry)
        trust.current_identity(p)
        built = pw.build(p.registry, LocalObjectStore(team.tmp / "objects"), "req-1", parts=pw.partitions(seed=1)).realization
        assert p.registry.resolve_ref(built.ref).id == built.id
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    team.sql(update(st.identities).where(st.identities.c.name == "admin").values(public_key=raw.hex()))
    with build_platform(team.as_("bob")) as p, pytest.raises(UntrustedError, match="identity 'admin'"):
        p.registry.resolve_ref(built.ref)


def test_an_existing_home_pins_its_root_and_certifies_its_rows_once(backend_url: str, tmp_path: Path) -> None:
    home = tmp_path / "old"
    with build_platform(home_on(backend_url, home)) as p:  # a home from before certificates: its rows, no certificate, no root
        trust.create_identity(p, "admin", by="bootstrap")
        for role in Role:
            trust.records(p).change_grant(Grant("admin", role), add=True, by="bootstrap")
        trust.create_identity(p, "bob", by="admin")
        trust.records(p).change_grant(Grant("bob", Role.CONSUMER), add=True, by="admin")
    assert not (home / ROOT_FILE).exists()
    with build_platform(home_on(backend_url, home)) as p:
        admin = trust.current_identity(p)  # the bootstrap identity: pins its key and certifies the rows as they are (audited)
        assert (home / ROOT_FILE).read_text().strip() == admin.public_key.hex()
        assert [e["action"] for e in trust.records(p).audit_entries()][-1] == "trust.certify"
        at = trust.records(p).identities()[0].created_at
    root = admin.public_key.hex()
    with build_platform(home_on(backend_url, home, DSV_IDENTITY="bob", DSV_TRUST_ROOT=root)) as p:
        assert trust.require(p, Role.CONSUMER).role is Role.CONSUMER
        grant = Grant("bob", Role.OPERATOR)
        row = {"scope_key": scope_key(grant), "identity": "bob", "role": "operator", "columns_json": "[]", "created_by": "admin", "created_at": at}
        with p.registry.engine.begin() as conn:
            conn.execute(insert(st.grants).values(**row))
    keys = str(home / "identities")  # a new home of the admin on the certified registry pins its root but blesses nothing
    with build_platform(home_on(backend_url, tmp_path / "new", DSV_KEY_DIR=keys)) as p:
        trust.current_identity(p)
        assert (tmp_path / "new" / ROOT_FILE).read_text().strip() == root
    bob = home_on(backend_url, tmp_path / "new", DSV_KEY_DIR=keys, DSV_IDENTITY="bob")
    with build_platform(bob) as p, pytest.raises(UntrustedError, match="grant operator any of identity 'bob'"):
        trust.require(p, Role.OPERATOR)


def test_a_malformed_trust_root_is_a_configuration_error(team: Team) -> None:
    with pytest.raises(EnvironmentSetupError, match="DSV_TRUST_ROOT: not an Ed25519 public key"):
        build_platform(home_on(team.url, team.home, DSV_TRUST_ROOT="not-a-key"))


def test_dsv_trust_certify_adopts_a_registry_from_before_certificates(
    backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "ops"
    with build_platform(home_on(backend_url, home, DSV_STRICT="1", DSV_IDENTITY="boss")) as p:  # rows written without certificates
        trust.mark_strict(p)
        boss, _ = trust.create_identity(p, "boss", by="boss")
        trust.records(p).change_grant(Grant("boss", Role.OPERATOR), add=True, by="boss")
    env = {"DSV_HOME": str(home), "DSV_REGISTRY_URL": backend_url, "DSV_TRUST_ROOT": boss.public_key.hex()}
    dsv = DsvCli(capsys, monkeypatch, env)
    refused = dsv("identity", "create", "wanda", identity="boss")
    assert refused.code == 13 and "grant operator any of identity 'boss'" in refused.err, refused
    done = dsv("trust", "certify", identity="boss")
    assert done.code == 0 and "certified 1 key(s) and grant(s) as boss" in done.out, done
    assert dsv("identity", "create", "wanda", identity="boss").code == 0
    other = dsv("trust", "certify", identity="wanda")
    assert other.code == 7 and "does not hold the pinned trust root" in other.err, other


def test_dsv_init_strict_pins_its_admin_as_the_root(
    backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "ops"
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(home), "DSV_REGISTRY_URL": backend_url})
    assert dsv("init", "--strict", "--admin", "boss").code == 0
    assert dsv("identity", "create", "wanda", identity="boss").code == 0
    assert dsv("grants", "add", "wanda", "auditor", "--reason", "reads the log", identity="boss").code == 0
    assert dsv("audit", identity="wanda").code == 0
    with build_platform(home_on(backend_url, home, DSV_IDENTITY="boss")) as p:
        assert (home / ROOT_FILE).read_text().strip() == trust.records(p).get_identity("boss").public_key  # type: ignore[union-attr]
        grant = Grant("wanda", Role.OPERATOR)
        at = trust.records(p).identities()[0].created_at
        row = {"scope_key": scope_key(grant), "identity": "wanda", "role": "operator", "columns_json": "[]", "created_by": "boss", "created_at": at}
        with p.registry.engine.begin() as conn:
            conn.execute(insert(st.grants).values(**row))
    refused = dsv("identity", "create", "mallory", identity="wanda")
    assert refused.code == 13 and "grant operator any of identity 'wanda'" in refused.err, refused
