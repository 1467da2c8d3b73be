"""`dsv model`: model versions (run manifest hashes), approvals and aliases moved by compare-and-swap (issue 27 item 1)."""

from __future__ import annotations

import json

import pytest

from dsv_platform.services.reproduction.model_run import ModelRun
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services.reproduce_support import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("model_cmd"))


@pytest.fixture(scope="module")
def runs(lab: Lab) -> tuple[ModelRun, ModelRun]:
    return lab.model(lab.fresh()), lab.model(lab.fresh())


@pytest.fixture
def dsv(lab: Lab, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(lab.settings.home)})


def test_model_versions_are_listed_and_named_every_way(runs: tuple[ModelRun, ModelRun], dsv: DsvCli) -> None:
    first, second = runs
    listed = dsv("model", "list", "--json")
    assert listed.code == 0, listed.err
    versions = {v["run_hash"]: v for v in json.loads(listed.out)}
    assert {first.run_hash, second.run_hash} <= set(versions)
    v = versions[first.run_hash]
    assert (v["model"], v["state"], v["trained_on"], v["trained_by"], v["registered"]) == ("fraud_model", "PUBLISHED", first.ref, "admin", True)
    expect: list[str] = []  # the first move creates the alias
    for ref in (f"fraud_model@sha256:{first.run_hash}", f"model_run:{first.run_hash}", first.run_hash[:12], f"sha256:{first.run_hash}"):
        moved = dsv("model", "alias", "set", "fraud_model@named", ref, "--json", *expect)
        assert moved.code == 0 and json.loads(moved.out)["target"] == first.run_hash, (ref, moved.err)
        expect = ["--expect", first.run_hash]
    wrong_model = dsv("model", "alias", "set", "fraud_model@named", f"other_model@sha256:{first.run_hash}", "--expect", first.run_hash)
    assert wrong_model.code == 3 and "is a version of fraud_model, not other_model" in wrong_model.err
    unknown = dsv("model", "alias", "set", "fraud_model@named", "ab" * 32, "--expect", first.run_hash)
    assert unknown.code == 3 and "no model version" in unknown.err
    assert dsv("model", "alias", "set", "fraud_model", first.run_hash).code == 2  # NAME@ALIAS or nothing


def test_model_alias_cas_conflict(runs: tuple[ModelRun, ModelRun], dsv: DsvCli) -> None:
    first, second = runs
    created = dsv("model", "alias", "set", "fraud_model@staging", first.run_hash, "--json")
    assert created.code == 0, created.err
    assert json.loads(created.out)["generation"] == 1
    again = dsv("model", "alias", "set", "fraud_model@staging", second.run_hash)  # no --expect: create, but it exists
    assert again.code == 2 and "expected to point to (nothing: create) but points to " + first.run_hash in again.err, again.err
    stale = dsv("model", "alias", "set", "fraud_model@staging", second.run_hash, "--expect", second.run_hash)
    assert stale.code == 2 and f"expected to point to {second.run_hash} but points to {first.run_hash}" in stale.err, stale.err
    by_alias = dsv("model", "alias", "set", "fraud_model@staging", second.run_hash, "--expect", "fraud_model@staging")
    assert by_alias.code == 2 and "not an alias" in by_alias.err, "an alias as the expectation would always match itself"
    moved = dsv("model", "alias", "set", "fraud_model@staging", second.run_hash, "--expect", f"fraud_model@sha256:{first.run_hash}", "--json")
    assert moved.code == 0 and json.loads(moved.out)["generation"] == 2, moved.err
    history = json.loads(dsv("model", "alias", "history", "fraud_model@staging", "--json").out)
    assert [(h["old_target"], h["new_target"], h["actor"]) for h in history] == [(None, first.run_hash, "admin"), (first.run_hash, second.run_hash, "admin")]
    audit = json.loads(dsv("audit", "--json").out)
    moves = [e for e in audit if e["action"] == "model.alias.move" and e["target"] == "fraud_model@staging"]
    assert [(e["identity"], e["detail"]["to"]) for e in moves] == [("admin", first.run_hash), ("admin", second.run_hash)]


def test_protected_model_alias_refuses_an_unapproved_version(runs: tuple[ModelRun, ModelRun], dsv: DsvCli) -> None:
    first, _ = runs
    refused = dsv("model", "alias", "set", "fraud_model@production", first.run_hash)
    assert refused.code == 16 and "protected" in refused.err and f"dsv model approve fraud_model@sha256:{first.run_hash}" in refused.err, refused.err
    own = dsv("model", "approve", first.run_hash, "--reason", "it trained well")  # admin trained it: separation of duties
    assert own.code == 7 and "trained" in own.err and "cannot approve it" in own.err, own.err
    assert dsv("model", "approve", first.run_hash, "--reason", " ").code == 2  # every approval says why
    assert dsv("identity", "create", "reviewer").code == 0
    assert dsv("grants", "add", "reviewer", "approver").code == 0
    approved = dsv("model", "approve", first.run_hash, "--reason", "backtest passed", "--json", identity="reviewer")
    assert approved.code == 0, approved.err
    doc = json.loads(approved.out)
    assert (doc["state"], doc["actor"], doc["changed"]) == ("ELIGIBLE", "reviewer", True)
    moved = dsv("model", "alias", "set", "fraud_model@production", first.run_hash, "--json")
    assert moved.code == 0, moved.err
    pinned = dsv("model", "revoke", first.run_hash, "--reason", "regression found", identity="reviewer")
    assert pinned.code == 16 and "production" in pinned.err, pinned.err
    listed = {v["run_hash"]: v for v in json.loads(dsv("model", "list", "--model", "fraud_model", "--json").out)}
    assert listed[first.run_hash]["state"] == "ELIGIBLE" and "production" in listed[first.run_hash]["aliases"]
    text = dsv("model", "list").out
    assert f"fraud_model@sha256:{first.run_hash}  ELIGIBLE  @" in text and "production" in text
    audit = json.loads(dsv("audit", "--json").out)
    assert any(e["action"] == "model.approve" and e["identity"] == "reviewer" and e["reason"] == "backtest passed" for e in audit)
