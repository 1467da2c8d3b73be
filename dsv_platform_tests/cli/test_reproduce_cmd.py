"""`dsv reproduce`, `dsv rehearse`, `dsv promote`, `dsv status` in process against a real small world."""

from __future__ import annotations

import json

import pytest

from dsv_platform.cli.main import main
from dsv_platform_tests.services.reproduce_support import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("reproduce_cmd"))


def dsv(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("DSV_HOME", str(lab.settings.home))
    monkeypatch.setenv("DSV_ACTOR", "auditor")
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_reproduce_cmd_audits_rehearses_promotes_and_reports(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    run = lab.model(lab.fresh())
    code, out, _ = dsv(lab, monkeypatch, capsys, "reproduce", run.run_hash, "--json")
    doc = json.loads(out)
    assert (code, doc["outcome"], doc["actor"], doc["tolerance_needed"]) == (0, "REPRODUCED", "admin", "exact")  # not DSV_ACTOR (#24 item 6)
    code, out, _ = dsv(lab, monkeypatch, capsys, "reproduce", run.ref)
    assert code == 0 and out.startswith("REPRODUCED: ")

    code, out, _ = dsv(lab, monkeypatch, capsys, "rehearse", "--json")
    assert code == 0 and json.loads(out)["fraction"] == 1.0

    code, _, err = dsv(lab, monkeypatch, capsys, "promote", run.run_hash)
    assert code == 8 and "NOT_ELIGIBLE" in err and "dsv approve" in err, err  # not approved yet
    assert dsv(lab, monkeypatch, capsys, "identity", "create", "auditor")[0] == 0  # the lab built it as admin: admin cannot approve it
    assert dsv(lab, monkeypatch, capsys, "grants", "add", "auditor", "approver")[0] == 0
    monkeypatch.setenv("DSV_IDENTITY", "auditor")
    code, out, _ = dsv(lab, monkeypatch, capsys, "approve", run.ref, "--reason", "audit reproduced it")
    monkeypatch.delenv("DSV_IDENTITY")
    assert code == 0 and "ELIGIBLE" in out
    code, out, _ = dsv(lab, monkeypatch, capsys, "promote", run.run_hash, "--json")
    assert code == 0 and json.loads(out)["alias_ref"] == "fraud_training_set:v6@production"

    code, out, _ = dsv(lab, monkeypatch, capsys, "status", "--json")
    status = {s["ref"]: s for s in json.loads(out)}
    v6 = status["fraud_training_set:v6"]
    assert code == 0 and v6["usable_ref"] is not None and v6["rows"] > 0 and v6["bytes"] > 0
    assert v6["publication_lag_seconds"] > 0 and "build_and_seal" in v6["stage_seconds"]
    assert any("admin" in c["readers"] for c in v6["consumption"].values())  # reproduce read it as admin, whatever DSV_ACTOR says
    assert (v6["approval"]["state"], v6["approval"]["approved_by"], v6["approval"]["approval_reason"]) == ("ELIGIBLE", "auditor", "audit reproduced it")
    code, out, _ = dsv(lab, monkeypatch, capsys, "status")
    assert code == 0 and "fraud_training_set:v6: usable" in out and "state ELIGIBLE, approved by auditor" in out


def test_reproduce_cmd_failures_exit_nonzero(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = dsv(lab, monkeypatch, capsys, "reproduce", "ef" * 32, "--json")
    assert code == 1 and json.loads(out)["outcome"] == "NOT_FOUND"
    code, _, err = dsv(lab, monkeypatch, capsys, "promote", "ef" * 32)
    assert code == 8 and "RUN_MANIFEST_MISSING" in err
