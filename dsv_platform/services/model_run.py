"""Training a model (any: the trainer is passed in) on a pinned realization and recording the run.

The trainer reads the train split of exactly one realization (by reference,
through :func:`open_dataset`, which re-hashes every object) and is evaluated on
the validation split; its run manifest (model name, trainer import path,
parameters, seed, metrics, weights hash) is stored as a content-addressed
object, linked to the realization in the registry's lineage (one
``realization --trained--> model_run:<run manifest hash>`` edge per run), and
the model version is registered as a ``model_version`` retention root on
``model_run:<run manifest hash>`` (keeping the run manifest and the realization).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.core import canonical_json
from dsv_platform.core.model_run import Trainer, TrainingData, run_manifest, run_manifest_hash, trainer_path
from dsv_platform.services import openlineage
from dsv_platform.services.datasets import open_dataset
from dsv_platform.services.lineage import record_model_lineage

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

    @property
    def metrics(self) -> dict[str, int | str]:
        return dict(self.run_manifest["metrics"])


@openlineage.emits(openlineage.training_job, openlineage.training_io)
def train_model(
    platform: Platform,
    ref: str,
    *,
    model_name: str,
    trainer: Trainer,
    seed: int,
    parameters: Mapping[str, int] | None = None,
    actor: str | None = None,
) -> ModelRun:
    """Train ``model_name`` with ``trainer`` on ``ref``'s train split, evaluate on validation, store and link the run manifest."""
    who = actor or model_name
    ds = open_dataset(platform, ref, actor=who)
    params = dict(parameters or {})
    model = trainer(TrainingData(ds.to_arrow(split="train"), ds.to_arrow(split="validation"), seed, params))
    m = ds.manifest
    doc = run_manifest(
        model=model_name,
        trainer=trainer_path(trainer),
        ref=ds.ref,
        manifest_hash=ds.manifest_hash,
        code=m.code.to_document() if m.code else {"commit": "unknown", "dirty": False},
        environment=m.environment.to_document() if m.environment else {},
        parameters=params,
        seed=seed,
        metrics=model.metrics,
        weights_hash=model.weights_hash,
    )
    run_hash = run_manifest_hash(doc)
    store = platform.store
    run_object = store.put(canonical_json.dumps(doc))
    registry = platform.registry
    record_model_lineage(registry, ds.manifest_hash, run_hash, model=model_name, ref=ds.ref, run_object=run_object, actor=who)
    root = registry.add_retention_root("model_version", f"model_run:{run_hash}", f"{model_name} trained on {ds.ref} (run manifest object {run_object})", who)
    sources = tuple((s.table, s.snapshot_id, s.tag) for s in m.sources)
    return ModelRun(ds.ref, ds.manifest_hash, ds.content_hash, doc, run_hash, run_object, sources, root, model_name)
