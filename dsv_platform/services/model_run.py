"""Training the fraud model on a pinned realization and recording the run.

The model reads the train split of exactly one realization (by reference,
through :func:`open_dataset`, which re-hashes every object), is evaluated on
the validation split, and its run manifest is stored as a content-addressed
object, linked to the realization in the registry's lineage
(``realization`` -> ``model:fraud_model@<run manifest hash>``), and the model
version is registered as a ``model_version`` retention root keeping the
realization it was trained on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TYPE_CHECKING

from dsv_platform.core import canonical_json
from dsv_platform.core.model import TrainingParameters, evaluate, run_manifest, run_manifest_hash, train
from dsv_platform.services.datasets import open_dataset

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

    @property
    def metrics(self) -> dict[str, int | str]:
        return dict(self.run_manifest["metrics"])


def train_model(platform: Platform, ref: str, *, seed: int, parameters: TrainingParameters = TrainingParameters(), actor: str = "fraud_model") -> ModelRun:
    """Train on ``ref``'s train split, evaluate on validation, store and link the run manifest."""
    ds = open_dataset(platform, ref, actor=actor)
    model = train(ds.to_arrow(split="train"), seed=seed, parameters=parameters)
    metrics = evaluate(model, ds.to_arrow(split="validation"))
    m = ds.manifest
    doc = run_manifest(
        ref=ds.ref,
        manifest_hash=ds.manifest_hash,
        code=m.code.to_document() if m.code else {"commit": "unknown", "dirty": False},
        environment=m.environment.to_document() if m.environment else {},
        parameters=parameters.to_document(),
        seed=seed,
        metrics=metrics,
        weights_hash=model.weights_hash(),
    )
    run_hash = run_manifest_hash(doc)
    store = platform.store
    run_object = store.put(canonical_json.dumps(doc))
    registry = platform.registry
    model_id = f"model:fraud_model@{run_hash}"
    registry.record_lineage([("realization", ds.manifest_hash, "model", model_id, "trained", {"ref": ds.ref, "run_object": run_object})], actor=actor)
    root = registry.add_retention_root("model_version", ds.ref, f"{model_id} was trained on it (run manifest object {run_object})", actor)
    sources = tuple((s.table, s.snapshot_id, s.tag) for s in m.sources)
    return ModelRun(ds.ref, ds.manifest_hash, ds.content_hash, doc, run_hash, run_object, sources, root)
