"""`dsv diff RUN_A RUN_B` on model runs and artifacts: the manifest sections, the realization diff it offers and runs
(--data), and typed failures (a run against a realization, an unknown run, a tampered manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import update

from dsv_platform.adapters.registry import schema as s
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.reproduction.artifacts import produce_artifact
from dsv_platform.services.reproduction.model_run import ModelRun, train_model
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.artifact_support import DATASET, PRODUCER

pytestmark = pytest.mark.slow  # a fraud world, two builds and three trainings (the pure diff is tested in core/test_run_diff.py)

CODE = {"repo": "/srv/reports", "commit": "ab" * 20, "dirty": False}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("diff_runs"), days=3)


@pytest.fixture(scope="module")
def runs(world: World) -> dict[str, ModelRun]:
    v5, v6 = world.build("v5"), world.build("v6")
    train = lambda ref, seed, **params: train_model(world.platform, ref, model_name=MODEL_NAME, trainer=TRAINER, seed=seed, parameters=params)  # noqa: E731
    return {"base": train(v6.ref, 11), "seed": train(v6.ref, 12, epochs=3), "v5": train(v5.ref, 11)}


@pytest.fixture
def dsv(world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(Path(world.settings.home))})


def _sections(out: str) -> dict[str, list[dict[str, object]]]:
    doc = json.loads(out)
    return {k: v for k, v in doc["sections"].items() if v}


def test_two_runs_on_one_realization_differ_in_seed_and_parameters_with_no_data_to_diff(runs: dict[str, ModelRun], dsv: DsvCli) -> None:
    done = dsv("diff", f"model_run:{runs['base'].run_hash}", f"model_run:{runs['seed'].run_hash}", "--json")
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    assert doc["a"]["kind"] == "model_run" and doc["a"]["manifest_hash"] == runs["base"].run_hash and not doc["identical"]
    sections = _sections(done.out)
    assert [c["name"] for c in sections["configuration"]] == ["parameters.epochs"] and sections["seed"] == [{"section": "seed", "name": "", "a": 11, "b": 12}]
    assert "data" not in sections and "labels" not in sections and doc["realization_diffs"] == []


def test_runs_on_two_definitions_show_the_data_and_label_change_and_offer_the_realization_diff(runs: dict[str, ModelRun], dsv: DsvCli) -> None:
    a, b = runs["base"], runs["v5"]
    done = dsv("diff", a.run_hash, b.run_hash)
    assert done.code == 0, done.err
    assert "differs in: " in done.out and "data" in done.out.splitlines()[2] and "seed          same" in done.out
    offered = [line for line in done.out.splitlines() if line.startswith("data fraud_training_set differs")]
    assert len(offered) == 1 and f"@sha256:{a.manifest_hash}" in offered[0] and f"@sha256:{b.manifest_hash}" in offered[0]
    with_data = dsv("diff", f"model_run:{a.run_hash}", f"model_run:{b.run_hash}", "--data", "--json")
    assert with_data.code == 0, with_data.err
    [pair] = json.loads(with_data.out)["realization_diffs"]
    assert pair["dataset"] == "fraud_training_set" and {"added", "removed", "changed", "label_version"} <= set(pair["diff"])
    human = dsv("diff", a.run_hash, b.run_hash, "--data")
    assert "# realization diff of fraud_training_set" in human.out and "rows         added" in human.out


def test_the_same_run_twice_is_identical(runs: dict[str, ModelRun], dsv: DsvCli) -> None:
    done = dsv("diff", runs["base"].run_hash, f"model_run:{runs['base'].run_hash[:16]}")
    assert done.code == 0 and "identical manifests" in done.out and "data fraud_training_set" not in done.out


def test_two_artifacts_compare_parameters_seed_and_results(world: World, runs: dict[str, ModelRun], dsv: DsvCli) -> None:
    first = produce_artifact(world.platform, PRODUCER, inputs={DATASET: DATASET}, parameters={"scale": 1}, seed=3, code=CODE)
    second = produce_artifact(world.platform, PRODUCER, inputs={DATASET: DATASET}, parameters={"scale": 2}, seed=3, code=CODE)
    done = dsv("diff", f"artifact:{first.manifest_hash}", f"artifact:{second.manifest_hash}", "--json")
    assert done.code == 0, done.err
    sections = _sections(done.out)
    assert [c["name"] for c in sections["configuration"]] == ["parameters.scale"] and [c["name"] for c in sections["outcome"]] == ["results.scale"]
    assert "data" not in sections and json.loads(done.out)["b"]["kind"] == "artifact"


def test_a_run_against_a_realization_an_unknown_run_and_a_tampered_manifest_fail_in_one_line(world: World, runs: dict[str, ModelRun], dsv: DsvCli) -> None:
    mixed = dsv("diff", runs["base"].run_hash, "fraud_training_set:v6")
    assert mixed.code == 2 and mixed.err.startswith("dsv: error:") and "not one of each" in mixed.err
    unknown = dsv("diff", runs["base"].run_hash, "model_run:" + "0" * 64)
    assert unknown.code == 3 and "no complete model run or artifact" in unknown.err and unknown.err.count("\n") == 1
    with world.registry.engine.begin() as conn:
        row = s.production_runs
        doc = dict(runs["seed"].run_manifest, seed=99)
        conn.execute(update(row).where(row.c.manifest_hash == runs["seed"].run_hash).values(manifest_json=json.dumps(doc)))
    tampered = dsv("diff", runs["base"].run_hash, runs["seed"].run_hash)
    assert tampered.code == 6 and "does not hash to" in tampered.err
