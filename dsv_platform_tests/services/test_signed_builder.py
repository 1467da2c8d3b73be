"""Issue 24, unsigned builder and launch rows: the approval rules read rows an insider could change; now they read the signed statement.

On the real registries (SQLite and PostgreSQL): mallory (builder, publisher, approver) builds and signs a realization, so
she may not approve it; the service ``svc`` builds one in a Dagster run nobody proved launching, so carol (who holds a
builder grant) may not approve it. The publisher signs the builder and the launch into each statement. An insider with
database write access then re-attributes mallory's build to bob, deletes its builder row, marks svc's launch verified or
deletes it: before, each let the refused approver through; now the approval is UNTRUSTED (exit 13) naming the realization
and the field, or the signed builder still refuses it, and ``dsv audit --verify`` names the changed row.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import text

from dsv_platform.adapters.registry.launches import Launch
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.errors import AccessDeniedError, UntrustedError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.trust import dsse
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.services.trust import signing, trust
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

ROLES = {"mallory": (Role.BUILDER, Role.PUBLISHER, Role.APPROVER), "svc": (Role.BUILDER, Role.PUBLISHER), "carol": (Role.BUILDER, Role.APPROVER),
         "bob": (Role.APPROVER,)}  # fmt: skip


@dataclass
class Builds:
    settings: Settings
    url: str
    mine: Realization  # built and signed by mallory
    launched: Realization  # built by svc in a Dagster run nobody proved launching

    def as_(self, name: str) -> Platform:
        return build_platform(dataclasses.replace(self.settings, identity=name))

    def approve_as(self, name: str, realization: Realization) -> bool:
        with self.as_(name) as p:
            return approve(p.registry, realization.ref, reason="reviewed", actor=name, gate=trust.gatekeeper(p)).changed

    def sql(self, stmt: str, table: str) -> None:
        """What the insider does, straight to the database (``table``'s append-only trigger first, where it has one)."""
        with Registry.from_url(self.url) as reg, reg.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_update"))
                conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_delete"))
            elif table == "realization_launches":
                conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only"))
            conn.execute(text(stmt))


def publish_as(p: Platform, request_id: str, seed: int) -> Realization:
    publisher = Publisher(p.registry, p.store, actor=trust.current_identity(p).name, signer=signing.signer_of(p), gate=trust.gatekeeper(p))
    return publisher.build(pw.request(request_id, logical_key=request_id, parts=pw.partitions(seed=seed))).realization


@pytest.fixture
def builds(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Builds]:
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_REGISTRY_URL", backend_url)
    settings = load_settings()
    with build_platform(settings) as p:
        admin = trust.current_identity(p).name
        pw.register(p.registry)
        for name, roles in ROLES.items():
            trust.create_identity(p, name, by=admin)
            for role in roles:
                trust.change_grant(p, Grant(name, role), add=True, reason="team")
    with build_platform(dataclasses.replace(settings, identity="mallory")) as p:
        mine = publish_as(p, "req-mallory", 1)
    with build_platform(dataclasses.replace(settings, identity="svc")) as p:
        trust.adopt_launch(p, Launch(service="svc", run_id="run-1", job="publish_job"))  # a Launchpad run: no launch request
        launched = publish_as(p, "req-svc", 2)
    yield Builds(settings, backend_url, mine, launched)


def audit_verify(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", "--verify", "--json"])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out + out.err


def untrusted_approval(builds: Builds, name: str, realization: Realization, *names: str) -> None:
    with pytest.raises(UntrustedError) as caught:
        builds.approve_as(name, realization)
    assert caught.value.exit_code == 13
    for part in (realization.ref, *names):
        assert part in str(caught.value), (part, str(caught.value))


def test_the_statement_signs_the_builder_and_the_launch_and_the_rules_hold(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    with builds.as_("bob") as p:
        for r, builder, launch in ((builds.mine, "mallory", None), (builds.launched, "svc", {"launcher": None, "service": "svc", "run_id": "run-1"})):
            row = p.registry.signature_of(r.id)
            assert row is not None
            statement = dsse.parse_statement(dsse.parse_envelope(p.store.get(row.envelope_object)))
            assert statement.builder == builder and statement.signs_launch
            assert (statement.launch if launch is None else {k: statement.launch[k] for k in launch}) == launch  # type: ignore[index]
    code, out = audit_verify(capsys)
    assert code == 0 and json.loads(out)["signed_builders"] == 2, out
    with pytest.raises(AccessDeniedError, match="'mallory' built"):
        builds.approve_as("mallory", builds.mine)
    with pytest.raises(AccessDeniedError, match=r"launched unverified in Dagster run run-1.*'carol' holds a builder grant"):
        builds.approve_as("carol", builds.launched)
    assert builds.approve_as("bob", builds.mine) and builds.approve_as("bob", builds.launched)


def test_a_builder_row_re_attributed_is_untrusted_at_approval_and_audit(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    builds.sql(f"UPDATE realization_builders SET identity = 'bob' WHERE realization_id = {builds.mine.id}", "realization_builders")
    untrusted_approval(builds, "mallory", builds.mine, "builder row names 'bob'", "signed statement names builder 'mallory'")
    code, out = audit_verify(capsys)
    assert code == 13 and builds.mine.ref in out and "realization_builders.identity" in out, out


def test_a_builder_row_deleted_still_leaves_the_signed_builder_refused(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    builds.sql(f"DELETE FROM realization_builders WHERE realization_id = {builds.mine.id}", "realization_builders")
    with pytest.raises(AccessDeniedError, match="'mallory' built"):
        builds.approve_as("mallory", builds.mine)


def test_an_unverified_launch_marked_verified_is_untrusted(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    builds.sql(
        f"UPDATE realization_launches SET launcher = 'svc', reason = 'signed launch request' WHERE realization_id = {builds.launched.id}",
        "realization_launches",
    )
    untrusted_approval(builds, "carol", builds.launched, "launch row has launcher 'svc'", "realization_launches.launcher")
    code, out = audit_verify(capsys)
    assert code == 13 and builds.launched.ref in out and "realization_launches.launcher" in out, out


def test_a_launch_row_deleted_is_untrusted(builds: Builds, capsys: pytest.CaptureFixture[str]) -> None:
    builds.sql(f"DELETE FROM realization_launches WHERE realization_id = {builds.launched.id}", "realization_launches")
    untrusted_approval(builds, "carol", builds.launched, "launch row is missing")
    code, out = audit_verify(capsys)
    assert code == 13 and builds.launched.ref in out and "launch row is missing" in out, out
