"""Issue 16 part 1 through the CLI: `dsv init --strict`, `dsv identity`, `dsv grants`, `dsv audit`, and every role's refusal (exit 7).

A strict home bootstraps nobody: each command runs as ``DSV_IDENTITY`` and needs an explicit grant;
a refusal is one line naming the identity and the role. In the embedded (non-strict) default the
bootstrap ``admin`` holds every role, yet cannot approve a realization it built.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.runs import Runner
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.trust.trust import Role
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result
from dsv_platform_tests.scenarios.support import World


@pytest.fixture
def dsv(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> DsvCli:
    """``dsv(*args, identity=None)``: the CLI in process on the test home, as ``identity`` (DSV_IDENTITY) when given."""
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home")})


def refused(result: Result, *names: str, code: int = 7) -> None:
    assert result.code == code, result
    assert result.err.count("\n") == 1 and result.err.startswith("dsv: error:") and "Traceback" not in result.err, result.err
    for name in names:
        assert name in result.err, (name, result.err)


def ok(result: Result) -> str:
    assert result.code == 0, result
    return result.out


def test_every_role_refusal_in_a_strict_home(dsv, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert "strict home" in ok(dsv("init", "--strict", "--admin", "boss"))
    refused(dsv("identity", "show"), "strict home needs an identity", "DSV_IDENTITY")
    for name in ("wanda", "bob", "carol", "dave"):
        assert "ed25519:sha256:" in ok(dsv("identity", "create", name, identity="boss"))
    refused(dsv("identity", "create", "eve", identity="bob"), "'bob'", "'operator'")
    for args in (("wanda", "source_writer", "--source", "transactions"), ("bob", "builder"), ("carol", "consumer", "--purpose", "fraud"), ("dave", "auditor")):
        assert "grant added" in ok(dsv("grants", "add", *args, "--reason", "team set-up", identity="boss"))
    batch = tmp_path / "batch.csv"
    batch.write_text("not read: refused first\n")
    refused(dsv("ingest", "transactions", str(batch), identity="carol"), "'carol'", "'source_writer'", "source=transactions")
    domain = FraudDomain(rows_per_day=20)
    day = domain.days(1)[0]
    real = daily_batch(domain, "transactions", day)
    (good := tmp_path / f"transactions__{day}__daily.{real.format}").write_bytes(real.data)
    ok(dsv("ingest", "transactions", str(good), identity="wanda"))  # the run acts as wanda: the landing index records her
    with build_platform(load_settings({"DSV_HOME": str(tmp_path / "home")})) as p:
        assert {r.writer for r in p.landing.records("transactions")} == {"wanda"}
    runner = Runner.open(load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_IDENTITY": "carol"}))
    try:  # a refusal inside a Dagster run (the raw asset as carol) is ACCESS_DENIED too, not a generic run failure
        with pytest.raises(AccessDeniedError, match=r"'carol' has no grant for role 'source_writer' on source=transactions"):
            runner.run(["raw/transactions"], partition=day.isoformat(), run_config={"ops": {"raw__transactions": {"config": {"files": [str(good)]}}}})
    finally:
        runner.close()
    capsys.readouterr()  # the run's own Dagster error log
    refused(dsv("ingest", "chargebacks", str(batch), identity="wanda"), "'wanda'", "'source_writer'", "source=chargebacks")
    refused(dsv("build", "fraud_training_set:v6", identity="wanda"), "'wanda'", "'builder'", "definition=fraud_training_set:v6")
    refused(dsv("gc", "apply", "--yes", identity="bob"), "'bob'", "'operator'")
    refused(dsv("retention", "add", "legal_hold", "fraud_training_set:v6", "--reason", "keep", identity="bob"), "'bob'", "'operator'")
    refused(dsv("privacy", "delete", "--subject", "acct-1", "--reason", "request", identity="bob"), "'bob'", "'privacy_officer'")
    refused(dsv("grants", "add", "bob", "publisher", identity="bob"), "'bob'", "'operator'")
    refused(dsv("audit", identity="boss"), "'boss'", "'auditor'")
    refused(dsv("identity", "show", identity="mallory"), "'mallory' is not registered")
    listed = json.loads(ok(dsv("grants", "list", "--json", identity="dave")))
    assert {(g["identity"], g["role"]) for g in listed} == {
        ("boss", "operator"),
        ("wanda", "source_writer"),
        ("bob", "builder"),
        ("carol", "consumer"),
        ("dave", "auditor"),
    }
    entries = json.loads(ok(dsv("audit", "--json", identity="dave")))
    assert [(e["identity"], e["action"], e["target"]) for e in entries] == [
        ("boss", "grant.add", "identity:boss"),
        *[("boss", "grant.add", f"identity:{n}") for n in ("wanda", "bob", "carol", "dave")],
        ("wanda", "canonical.seal", "table:transactions"),  # the first digests of the table's data files (docs/trust.md)
    ]
    assert "verifies: 6 entries" in ok(dsv("audit", "--verify", identity="dave"))
    assert "grant removed" in ok(dsv("grants", "remove", "dave", "auditor", identity="boss"))
    refused(dsv("audit", identity="dave"), "'dave'", "'auditor'")


def test_the_builder_cannot_approve_what_it_built_not_even_admin(dsv, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    world = World.create(tmp_path / "home")
    built = world.build("v6")  # as the bootstrap admin (no DSV_IDENTITY)
    realization = world.registry.find_by_manifest_hash(built.manifest.manifest_hash)
    assert realization is not None and trust.builder_of(world.platform, realization.id) == "admin"
    subject = str(world.tables.read(SOURCES["transactions"]).column("account_id")[0])
    world.platform.close()
    refused(dsv("approve", built.ref, "--reason", "looks fine"), "'admin' built", "cannot approve", "'approver'")
    assert "ed25519:sha256:" in ok(dsv("identity", "create", "reviewer"))
    refused(dsv("approve", built.ref, "--reason", "looks fine", identity="reviewer"), "'reviewer'", "'approver'")
    ok(dsv("grants", "add", "reviewer", "approver", "--definition", "fraud_training_set"))
    assert "ELIGIBLE" in ok(dsv("approve", built.ref, "--reason", "quality report reviewed", identity="reviewer"))
    refused(dsv("revoke", built.ref, "--reason", "x", identity="nobody"), "'nobody' is not registered")
    trail = json.loads(ok(dsv("audit", "--ref", "fraud_training_set:v6", "--json")))
    assert [(e["identity"], e["action"], e["target"]) for e in trail] == [
        ("admin", "publish", built.ref),
        ("admin", "alias.move", "fraud_training_set:v6@candidate"),
        ("reviewer", "approve", built.ref),
    ]
    assert trail[1]["detail"] == {"from": None, "to": built.manifest.manifest_hash} and trail[2]["reason"] == "quality report reviewed"
    refused(dsv("privacy", "delete", "--subject", subject, "--reason", "erasure request", identity="reviewer"), "'reviewer'", "'privacy_officer'")
    deleted = json.loads(ok(dsv("privacy", "delete", "--subject", subject, "--reason", "erasure request", "--json")))
    log = ok(dsv("audit", "--json"))
    (entry,) = [e for e in json.loads(log) if e["action"] == "privacy.delete"]
    assert entry["target"] == f"subject:{deleted['subject_key_hash']}" and entry["identity"] == "admin"
    assert subject not in log  # a direct identifier never enters the audit log in clear
    assert "audit log verifies" in ok(dsv("audit", "--verify"))
    assert {g["role"] for g in json.loads(ok(dsv("identity", "show", "--json")))["grants"]} == {r.value for r in Role}
