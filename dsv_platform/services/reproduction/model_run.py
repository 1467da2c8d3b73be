"""Training a model (any: the trainer is passed in) on a pinned realization and recording the run, intent first.

Before the trainer reads anything, an INTENT run is written to the registry
(model, trainer, ref, manifest hash, the trainer's own code pin, environment,
parameters, seed); an exception marks it FAILED, a crash leaves it INTENT. At
the end the run manifest (the intent plus metrics and weights hash) is stored
as a content-addressed object, linked ``realization --trained-->
model_run:<run manifest hash>``, kept by a ``model_version`` retention root on
that node (its source snapshots pinned as ``model-<name>-<hash12>`` first, dependent_pins.py), and the run is
COMPLETE: a model version (model_registry.py). Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import platform as host
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.lineage.openlineage import LineageDataset
from dsv_platform.adapters.registry.artifacts import MODEL_RUN, RunRecords
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError
from dsv_platform.core.publication.manifest import CodePin, EnvironmentPin
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.reproduction.model_run import Trainer, TrainingData, completed_run, run_intent, run_manifest_hash, trainer_path
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.lineage.lineage import record_model_lineage
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization_inputs import environment_lockfile, environment_pin, runner_timezone
from dsv_platform.services.reproduction import code_pins
from dsv_platform.services.reproduction.code_pins import lockfile_sha256
from dsv_platform.services.reproduction.dependent_pins import pin_for, source_snapshots
from dsv_platform.services.reproduction.model_registry import register_run

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


@dataclass(frozen=True)
class ModelRun:
    ref: str
    manifest_hash: str
    content_hash: str
    run_manifest: dict[str, Any]
    run_hash: str
    run_object: str
    sources: tuple[tuple[str, str, str | None], ...]
    retention_root: int
    model_name: str = ""
    run_id: int = 0
    pins: tuple[Any, ...] = ()  # the PinnedSnapshot tags named for the run (``model-<name>-<hash12>``)

    @property
    def metrics(self) -> dict[str, int | str]:
        return dict(self.run_manifest["metrics"])


def trainer_code(trainer: Trainer, code: CodePin | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{repo, commit, dirty}`` of the trainer's own checkout (the repository holding its module); ``code`` overrides (tests)."""
    override = code.to_document() if isinstance(code, CodePin) else dict(code or {})
    return {**code_pins.checkout_of(code_pins.module_file(trainer)), **override}


def trainer_environment(platform: Platform, code: Mapping[str, Any], environment: EnvironmentPin | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The installed distributions' hash (stored, so an audit can diff), python, the repo's lock hash and the runner's TZ."""
    platform.store.put(environment_lockfile())
    current = {
        **environment_pin().to_document(),
        "python": host.python_version(),
        "lockfile_sha256": lockfile_sha256(str(code["repo"]), str(code["commit"])),
        "runner_timezone": runner_timezone(),
    }
    override = environment.to_document() if isinstance(environment, EnvironmentPin) else dict(environment or {})
    return {**current, **override}


# ---------------------------------------------------------------- lineage descriptors (services/lineage/openlineage.py emits them)


def model_dataset(platform: Platform, run: ModelRun) -> LineageDataset:
    """``model_run:<run manifest hash>`` as ``model/<model>`` at version ``<run manifest hash>``."""
    facet = {"node": f"model_run:{run.run_hash}", "kind": "model_run", "run_manifest_hash": run.run_hash, "run_object": run.run_object,
             "trained_on": run.ref, "trained_on_manifest_hash": run.manifest_hash, "trained_on_content_hash": run.content_hash}  # fmt: skip
    return LineageDataset(openlineage.namespace(platform), f"model/{run.model_name}", run.run_hash, (), facet)


def training_job(platform: Platform, ref: str, *, model_name: str, **_: Any) -> tuple[str, str]:
    return f"train.{model_name}", "MODEL_TRAINING"


def training_io(run: ModelRun, platform: Platform, ref: str, **_: Any) -> openlineage.IO:
    """Input: the realization trained on (by its manifest hash); output: the model run."""
    parsed = parse_ref(run.ref)
    facet = {"node": f"realization:{run.manifest_hash}", "kind": "realization", "ref": run.ref,
             "manifest_hash": run.manifest_hash, "content_hash": run.content_hash}  # fmt: skip
    trained_on = LineageDataset(openlineage.namespace(platform), f"{parsed.name}:{parsed.version}", run.manifest_hash, (), facet)
    return [trained_on], [model_dataset(platform, run)]


@openlineage.emits(training_job, training_io)
def train_model(
    platform: Platform,
    ref: str,
    *,
    model_name: str,
    trainer: Trainer,
    seed: int,
    parameters: Mapping[str, int] | None = None,
    actor: str | None = None,
    code: CodePin | Mapping[str, Any] | None = None,
    environment: EnvironmentPin | Mapping[str, Any] | None = None,
) -> ModelRun:
    """Train ``model_name`` with ``trainer`` on ``ref``'s train split, evaluate on validation; the run is recorded intent first."""
    who = platform.actor  # the proven identity; ``actor`` is kept for callers, never recorded
    params = dict(parameters or {})
    path = trainer_path(trainer)
    pin = trainer_code(trainer, code)
    env = trainer_environment(platform, pin, environment)
    registry = platform.registry
    runs = RunRecords(registry)
    intent = run_intent(model=model_name, trainer=path, ref=ref, manifest_hash=None, code=pin, environment=env, parameters=params, seed=seed)
    try:
        realization = registry.resolve_ref(ref, actor=who)
    except DsvError as exc:  # recorded too: the run was intended and failed before reading anything
        runs.fail(runs.start(MODEL_RUN, model_name, producer=path, intent=intent, actor=who), error=f"{type(exc).__name__}: {exc}")
        raise
    intent["realization"] = {"ref": realization.ref, "manifest_hash": realization.manifest_hash}
    run_id = runs.start(MODEL_RUN, model_name, producer=path, intent=intent, actor=who)
    try:
        return _train(platform, runs, run_id, intent, trainer, who)
    except BaseException as exc:
        runs.fail_during(run_id, exc)
        raise


def _train(platform: Platform, runs: RunRecords, run_id: int, intent: Mapping[str, Any], trainer: Trainer, who: str) -> ModelRun:
    ds = open_dataset(platform, intent["realization"]["ref"], actor=who, purpose="training")  # needs a consumer grant for training (docs/trust.md)
    model = trainer(TrainingData(ds.to_arrow(split="train"), ds.to_arrow(split="validation"), intent["seed"], intent["parameters"]))
    doc = completed_run(intent, metrics=model.metrics, weights_hash=model.weights_hash)
    run_hash = run_manifest_hash(doc)
    run_object = platform.store.put(canonical_json.dumps(doc))
    registry = platform.registry
    model_name = str(intent["model"])
    record_model_lineage(registry, ds.manifest_hash, run_hash, model=model_name, ref=ds.ref, run_object=run_object, actor=who)
    pins = pin_for(platform, ("model_run", run_hash), model_name, source_snapshots(ds.manifest))
    root = registry.add_retention_root("model_version", f"model_run:{run_hash}", f"{model_name} trained on {ds.ref} (run manifest object {run_object})", who)
    register_run(platform, runs.complete(run_id, manifest_hash=run_hash, manifest=doc, files={"run_manifest.json": run_object}))  # a model version
    sources = tuple((s.table, s.snapshot_id, s.tag) for s in ds.manifest.sources)
    return ModelRun(ds.ref, ds.manifest_hash, ds.content_hash, doc, run_hash, run_object, sources, root, model_name, run_id, pins)
