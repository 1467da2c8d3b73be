"""Issue 24 item 10: a Dagster-built realization records who launched it, proven by a signed launch request, as its builder.

On a real Dagster instance, on SQLite and PostgreSQL: the service identity ``dagster`` runs the assets. A run whose tags
carry alice's signed launch request records alice as the builder (alice cannot approve it; bob, an approver, can). A run
without a request records ``dagster`` as builder and the launch as unverified: carol, an approver who also holds a builder
grant on it (so could have launched it), is refused; bob, who holds no builder grant, approves. A request replayed in
another run, forged, or for another job proves nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.launch import LAUNCH_TAG, launch_tags, verify_launch
from dsv_platform.settings import Settings
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

DAYS = ("2026-06-01", "2026-06-02")
JOB = "__ephemeral_asset_job__"  # dg.materialize's job: what a launch request for these runs names


@dataclasses.dataclass
class Team:
    settings: Settings
    instance: dg.DagsterInstance
    defs: dg.Definitions

    def as_(self, name: str) -> Platform:
        return build_platform(dataclasses.replace(self.settings, identity=name))

    def snapshot(self, version: str, tags: dict[str, str] | None = None) -> tuple[str, str]:
        """Materialize ``fraud_training_set:<version>``'s snapshot as one run; its ref and the run id."""
        result = dg.materialize([*self.defs.assets], selection=f"datasets/fraud_training_set/{version}", instance=self.instance,  # type: ignore[list-item]
                                resources=self.defs.resources, tags=tags or {})  # fmt: skip
        assert result.success
        mats = [e.materialization for e in result.get_asset_materialization_events()]
        return str(mats[-1].metadata["ref"].value), result.run_id


@pytest.fixture
def team(backend_url: str, tmp_path: Path) -> Iterator[Team]:
    settings = dataclasses.replace(settings_at(tmp_path / "dsv"), registry_url=backend_url)
    with build_platform(settings) as p:
        admin = trust.current_identity(p).name
        for name, roles in {"alice": (Role.BUILDER, Role.APPROVER), "bob": (Role.APPROVER, Role.CONSUMER), "carol": (Role.BUILDER, Role.APPROVER)}.items():
            trust.create_identity(p, name, by=admin)
            for role in roles:
                trust.change_grant(p, Grant(name, role, definition="fraud_training_set"), add=True, reason="team")
    defs = build_defs(settings)
    domain = FraudDomain(rows_per_day=120)
    drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with dg.DagsterInstance.ephemeral() as instance:
        assets: list[Any] = [*defs.assets]
        assert dg.materialize(assets, selection="group:raw or group:canonical", tags=range_tags(*DAYS), instance=instance, resources=defs.resources).success
        for version in ("v5", "v6"):
            assert dg.materialize(assets, selection="labels/fraud", partition_key=version, instance=instance, resources=defs.resources).success
        yield Team(settings, instance, defs)


def launch_by(team: Team, name: str, **kw: Any) -> dict[str, str]:
    with team.as_(name) as p:
        return launch_tags(p, job=JOB, **kw)


def test_the_launcher_a_signed_request_proves_is_the_builder(team: Team) -> None:
    ref, run_id = team.snapshot("v6", launch_by(team, "alice"))
    with team.as_("alice") as p:
        realization = p.registry.resolve_ref(ref)
        assert trust.builder_of(p, realization.id) == "alice", "the launcher, not the service identity"
        launch = trust.records(p).launch_of(realization.id)
        assert launch is not None and (launch.launcher, launch.service, launch.run_id) == ("alice", "dagster", run_id)
        with pytest.raises(AccessDeniedError, match="'alice' built"):
            approve(p.registry, ref, reason="my own build", actor="alice", gate=trust.gatekeeper(p))
    with team.as_("bob") as p:
        assert approve(p.registry, ref, reason="report reviewed", actor="bob", gate=trust.gatekeeper(p)).changed


def test_an_unverified_launch_is_approved_only_by_who_could_not_have_launched_it(
    team: Team, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ref, run_id = team.snapshot("v5")  # launched without a request: the Launchpad, or anyone with the UI
    with team.as_("carol") as p:
        realization = p.registry.resolve_ref(ref)
        assert trust.builder_of(p, realization.id) == "dagster"
        launch = trust.records(p).launch_of(realization.id)
        assert launch is not None and launch.launcher is None and launch.reason == "no launch request"
        with pytest.raises(AccessDeniedError, match=rf"launched unverified in Dagster run {run_id}.*'carol' holds a builder grant"):
            approve(p.registry, ref, reason="looks fine", actor="carol", gate=trust.gatekeeper(p))
    with team.as_("bob") as p:
        assert approve(p.registry, ref, reason="report reviewed", actor="bob", gate=trust.gatekeeper(p)).changed
    cli = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(team.settings.home), "DSV_REGISTRY_URL": team.settings.registry_url})
    verified = cli("verify", ref, "--json")
    assert verified.code == 0, verified
    doc = json.loads(verified.out)
    assert doc["built_by"] == "dagster" and doc["approved_by"] == ["bob"]
    assert doc["launch"] == {"launcher": None, "verified": False, "service": "dagster", "run_id": run_id, "reason": "no launch request"}


def test_a_replayed_forged_or_misdirected_request_proves_nothing(team: Team) -> None:
    tags = launch_by(team, "alice")
    with team.as_("dagster") as p:
        assert verify_launch(p, tags, job=JOB, run_id="run-1").launcher == "alice"
        assert verify_launch(p, tags, job=JOB, run_id="run-1").launcher == "alice", "the same run may show it again (a step retry)"
        replayed = verify_launch(p, tags, job=JOB, run_id="run-2")
        assert replayed.launcher is None and "replayed: run run-1 showed it first" in replayed.reason
        assert "not this run's" in verify_launch(p, launch_by(team, "alice"), job="publish_other", run_id="run-3").reason
        assert "not this run's" in verify_launch(p, launch_by(team, "alice", partition="v5"), job=JOB, run_id="run-4").reason
        envelope = json.loads(launch_by(team, "alice")[LAUNCH_TAG])
        body = json.loads(__import__("base64").b64decode(envelope["payload"]))
        body["identity"] = "carol"  # the request re-attributed: its signature no longer fits
        envelope["payload"] = __import__("base64").b64encode(json.dumps(body).encode()).decode()
        forged = verify_launch(p, {LAUNCH_TAG: json.dumps(envelope)}, job=JOB, run_id="run-5")
        assert forged.launcher is None and "does not verify under 'carol'" in forged.reason
        stale = verify_launch(p, launch_by(team, "alice"), job=JOB, run_id="run-6", now=dt.datetime.now(dt.UTC) + dt.timedelta(days=2))
        assert stale.launcher is None and "outside" in stale.reason


def test_dsv_build_launch_tags_prints_a_request_for_the_publication_job(
    team: Team, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"DSV_HOME": str(team.settings.home), "DSV_REGISTRY_URL": team.settings.registry_url}
    cli = DsvCli(capsys, monkeypatch, env)
    printed = cli("build", "fraud_training_set:v6", "--launch-tags", identity="alice")
    assert printed.code == 0, printed
    tags = json.loads(printed.out)
    with team.as_("dagster") as p:
        assert verify_launch(p, tags, job="publish_fraud_training_set_v6", run_id="ui-run").launcher == "alice"
    refused = cli("build", "fraud_training_set:v6", "--launch-tags", identity="bob")  # no builder grant: no request to sign
    assert refused.code == 7 and "'builder'" in refused.err, refused


@pytest.mark.slow
def test_dsv_build_records_the_command_identity_as_builder(team: Team, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cli = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(team.settings.home), "DSV_REGISTRY_URL": team.settings.registry_url})
    built = cli("build", "fraud_training_set:v6", "--json")  # the command is admin; its run acts as the service identity
    assert built.code == 0, built
    ref = json.loads(built.out)["ref"]
    with team.as_("bob") as p:
        realization = p.registry.resolve_ref(ref)
        launch = trust.records(p).launch_of(realization.id)
        assert launch is not None and (launch.launcher, launch.service) == ("admin", "dagster"), launch
        assert trust.builder_of(p, realization.id) == "admin", "the command that launched the run, not the service identity"
