"""`dsv deploy record`: deployments as lineage nodes; the incident walk from a raw batch to a deployment; GC roots (issue 27 item 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsv_platform.services.publication.realization import RealizationBuild
from dsv_platform.services.reproduction.model_run import ModelRun
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services.reproduce_support import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("deploy_cmd"))


@pytest.fixture(scope="module")
def trained(lab: Lab) -> tuple[RealizationBuild, ModelRun, RealizationBuild, ModelRun]:
    """Model A trained on realization A; then a newer realization B (the definition's head) and model B trained on it."""
    build_a = lab.fresh()
    model_a = lab.model(build_a)
    build_b = lab.fresh()
    return build_a, model_a, build_b, lab.model(build_b)


@pytest.fixture
def dsv(lab: Lab, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(lab.settings.home)})


def _json(dsv: DsvCli, *args: str) -> Any:
    result = dsv(*args, "--json")
    assert result.code == 0, (args, result.err)
    return json.loads(result.out)


def test_incident_walk_from_a_raw_batch_reaches_the_deployments(lab: Lab, trained: tuple[Any, ...], dsv: DsvCli) -> None:
    build_a, model_a, _, model_b = trained
    first = _json(dsv, "deploy", "record", f"fraud_model@sha256:{model_a.run_hash}", "--target", "scoring-eu", "--reason", "release 41")
    assert (first["target"], first["run_hash"], first["actor"], first["current"]) == ("scoring-eu", model_a.run_hash, "admin", True)
    assert first["node"] == f"deployment:scoring-eu@{model_a.run_hash}" and first["at"]
    batch = next(r for r in lab.world.zone.records() if r.day == lab.world.domain.days(lab.days_used - 1)[-1])  # landed for realization A

    impact = _json(dsv, "lineage", f"raw_batch:{batch.batch_ref}", "--impact")
    nodes = {n["node"]: n for n in impact["nodes"]}
    assert f"realization:{build_a.manifest_hash}" in nodes, "the realization that included the batch"
    assert f"model_run:{model_a.run_hash}" in nodes, "the model trained on it"
    deployed = nodes[f"deployment:scoring-eu@{model_a.run_hash}"]
    assert (deployed["target"], deployed["name"], deployed["current"], deployed["relation"]) == ("scoring-eu", "fraud_model", True, "deployed_to")
    assert [(d["target"], d["run_hash"], d["actor"]) for d in impact["deployments"]] == [("scoring-eu", model_a.run_hash, "admin")]
    model = next(m for m in impact["models"] if m["run_hash"] == model_a.run_hash)
    assert (model["model"], model["state"], [d["target"] for d in model["deployments"]]) == ("fraud_model", "PUBLISHED", ["scoring-eu"])

    served = _json(dsv, "lineage", f"deployment:scoring-eu@{model_a.run_hash}")  # provenance: what the deployment served, back to the batch
    assert {f"model_run:{model_a.run_hash}", f"realization:{build_a.manifest_hash}", f"raw_batch:{batch.batch_ref}"} <= {n["node"] for n in served["nodes"]}
    by_model = _json(dsv, "lineage", f"fraud_model@sha256:{model_a.run_hash}", "--impact")
    assert by_model["start"] == [f"model_run:{model_a.run_hash}"] and [d["target"] for d in by_model["deployments"]] == ["scoring-eu"]

    replaced = _json(dsv, "deploy", "record", model_b.run_hash[:16], "--target", "scoring-eu")
    assert replaced["current"] and replaced["run_hash"] == model_b.run_hash
    again = _json(dsv, "lineage", f"raw_batch:{batch.batch_ref}", "--impact")
    old = next(d for d in again["deployments"] if d["run_hash"] == model_a.run_hash)
    assert old["current"] is False, "scoring-eu serves model B now; model A's deployment is history, still reached"
    text = dsv("lineage", f"raw_batch:{batch.batch_ref}", "--impact")
    assert text.code == 0 and f"deployment on scoring-eu: fraud_model@sha256:{model_a.run_hash} recorded by admin" in text.out, text.out
    assert "replaced since" in text.out
    listed = _json(dsv, "deploy", "list", "--target", "scoring-eu", "--current")
    assert [d["run_hash"] for d in listed] == [model_b.run_hash]
    audit = _json(dsv, "audit")
    assert [e["detail"]["run_hash"] for e in audit if e["action"] == "deploy.record"] == [model_a.run_hash, model_b.run_hash]
    assert dsv("deploy", "record", model_a.run_hash, "--target", "bad@target").code == 2
    assert dsv("deploy", "record", "ab" * 32, "--target", "scoring-eu").code == 3


def _why(dsv: DsvCli, manifest_hash: str) -> dict[str, Any]:
    found = _json(dsv, "gc", "why", manifest_hash, "--safety-window-hours", "0")
    return next(e for e in found if e["node"] == f"realization:{manifest_hash}")


def test_gc_keeps_a_deployed_models_training_set(trained: tuple[Any, ...], dsv: DsvCli) -> None:
    build_a, model_a, _, model_b = trained
    roots = [r for r in _json(dsv, "retention", "list") if r["ref"] == f"model_run:{model_a.run_hash}"]
    assert [r["kind"] for r in roots] == ["model_version"]
    assert dsv("retention", "release", str(roots[0]["id"]), "--reason", "only what serves is kept").code == 0
    assert not _why(dsv, build_a.manifest_hash)["keep"], "model A neither serves nor is aliased: its training set (not the head) is collectable"

    _json(dsv, "deploy", "record", model_a.run_hash, "--target", "batch-scoring")
    kept = _why(dsv, build_a.manifest_hash)
    assert kept["keep"] and (kept["root"]["id"], kept["root"]["kind"]) == ("deployment:batch-scoring", "deployment"), kept
    assert [p["node"] for p in kept["path"]][:2] == [f"model_run:{model_a.run_hash}", f"realization:{build_a.manifest_hash}"]

    _json(dsv, "deploy", "record", model_b.run_hash, "--target", "batch-scoring")  # batch-scoring serves model B now
    assert not _why(dsv, build_a.manifest_hash)["keep"], "a replaced deployment is history, not a root"
    _json(dsv, "model", "alias", "set", "fraud_model@champion", model_a.run_hash)
    aliased = _why(dsv, build_a.manifest_hash)
    assert aliased["keep"] and aliased["root"]["id"] == "model_alias:fraud_model@champion", aliased
    assert _json(dsv, "lineage", "fraud_model@champion")["start"] == [f"model_run:{model_a.run_hash}"]

    _json(dsv, "deploy", "record", model_a.run_hash, "--target", "batch-scoring")
    applied = dsv("gc", "apply", "--yes", "--safety-window-hours", "0")
    assert applied.code == 0, applied.err
    assert dsv("verify", build_a.ref).code == 0, "the deployed model's training set is still there, every object re-hashed"
