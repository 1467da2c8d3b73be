"""A model run is recorded at its start (INTENT) and completed at its end; its code pin is the trainer's own checkout."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dsv_platform.adapters.registry.artifacts import RunRecords
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.manifest import CodePin
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.publication.realization import RealizationBuild, build_realization
from dsv_platform.services.reproduction.code_pins import checkout_of, module_file
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform_tests.scenarios.support import World, definition
from dsv_platform_tests.services.artifact_support import crashing_trainer, exploding_trainer

OTHER_CHECKOUT = CodePin("1234567" * 5 + "89ab1", False)


def _pin(code: dict[str, object]) -> tuple[object, object]:
    """Repository and commit (the dirty flag follows whoever edits the checkout meanwhile)."""
    return code["repo"], code["commit"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("model_runs"), days=3)


@pytest.fixture(scope="module")
def build(world: World) -> RealizationBuild:
    """A realization built from some other checkout: the model run must not copy its pin."""
    return build_realization(world.platform, definition("v6"), code=OTHER_CHECKOUT)


def test_a_normal_run_goes_from_intent_to_complete_with_the_trainers_checkout(world: World, build: RealizationBuild) -> None:
    run = train_model(world.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=11)
    trainer_checkout = checkout_of(module_file(TRAINER))
    assert trainer_checkout["commit"] not in ("unknown", OTHER_CHECKOUT.commit)
    assert run.run_manifest["code"]["commit"] == trainer_checkout["commit"]
    assert run.run_manifest["code"]["repo"] == trainer_checkout["repo"]
    record = RunRecords(world.registry).get(run.run_id)
    assert (record.kind, record.name, record.state) == ("model_run", MODEL_NAME, "COMPLETE")
    assert record.manifest_hash == run.run_hash and record.manifest == run.run_manifest
    assert record.files == {"run_manifest.json": run.run_object}
    assert record.intent["realization"] == {"ref": build.ref, "manifest_hash": build.manifest_hash}
    assert {k: v for k, v in run.run_manifest.items() if k not in ("format", "metrics", "weights_hash")} == record.intent
    assert run.run_manifest["environment"]["runner_timezone"] and run.run_manifest["environment"]["python"]


def test_a_trainer_that_raises_leaves_a_failed_run_with_its_code_pin(world: World, build: RealizationBuild) -> None:
    with pytest.raises(RuntimeError, match="training diverged"):
        train_model(world.platform, build.ref, model_name="exploding_model", trainer=exploding_trainer, seed=1, parameters={"epochs": 3})
    [run] = RunRecords(world.registry).runs(kind="model_run", name="exploding_model")
    assert run.state == "FAILED" and "RuntimeError: training diverged" in (run.error or "") and run.manifest_hash is None
    assert run.producer == "dsv_platform_tests.services.artifact_support:exploding_trainer"
    assert _pin(run.intent["code"]) == _pin(checkout_of(module_file(exploding_trainer)))
    assert run.intent["realization"]["manifest_hash"] == build.manifest_hash and run.intent["parameters"] == {"epochs": 3}
    trained = [e for e in world.registry.lineage_edges() if e.relation == "trained" and e.attributes.get("model") == "exploding_model"]
    assert trained == [], "a failed run links nothing"


def test_an_unresolvable_ref_is_recorded_as_a_failed_intent(world: World) -> None:
    missing = f"fraud_training_set:v6@sha256:{'0' * 64}"
    with pytest.raises(NotFoundError):
        train_model(world.platform, missing, model_name="orphan_model", trainer=TRAINER, seed=1)
    [run] = RunRecords(world.registry).runs(kind="model_run", name="orphan_model")
    assert run.state == "FAILED" and run.intent["realization"] == {"ref": missing, "manifest_hash": None}


def test_a_crash_mid_training_leaves_the_run_intent(world: World, build: RealizationBuild) -> None:
    code = (
        "from dsv_platform.bootstrap import build_platform\n"
        "from dsv_platform.settings import load_settings\n"
        "from dsv_platform.services.reproduction.model_run import train_model\n"
        "from dsv_platform_tests.services.artifact_support import crashing_trainer\n"
        f"train_model(build_platform(load_settings()), {build.ref!r}, model_name='crashing_model', trainer=crashing_trainer, seed=2)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "DSV_HOME": str(world.settings.home)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 19, done.stderr[-2000:]
    [run] = RunRecords(world.registry).runs(kind="model_run", name="crashing_model")
    assert run.state == "INTENT" and run.error is None and run.manifest_hash is None
    assert _pin(run.intent["code"]) == _pin(checkout_of(module_file(crashing_trainer))) and run.intent["realization"]["manifest_hash"] == build.manifest_hash
