"""Model training runs, generic over the model: what a trainer gets and returns, and the run manifest.

A trainer is any callable ``(TrainingData) -> TrainedModel``; the run manifest
records the model's name and the trainer's import path (``module:function``),
so an audit can rerun it. Metrics are integers or strings, so the run manifest
is canonical JSON; its hash identifies the training run. The intent (written at
the start) is the run manifest without format, metrics and weights hash.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ConfigurationError

RUN_FORMAT = "dsv-model-run/1"
LEGACY_MODEL = "fraud_model"
LEGACY_TRAINER = "dsv_platform.examples.fraud.model:train_run"
"""What run manifests recorded before model names and trainers were recorded ran (the packaged example's model)."""


@dataclass(frozen=True)
class TrainingData:
    """The splits of one pinned realization, the seed and the parameters (``smoke``: a few steps, only checking it trains)."""

    train: pa.Table
    validation: pa.Table
    seed: int
    parameters: Mapping[str, int] = field(default_factory=dict)
    smoke: bool = False


@dataclass(frozen=True)
class TrainedModel:
    """What a trainer returns: the hash of its weights, validation metrics, and whether its weights are finite."""

    weights_hash: str
    metrics: Mapping[str, int | str]
    finite: bool = True


Trainer = Callable[[TrainingData], TrainedModel]


def trainer_path(trainer: Trainer) -> str:
    """``module:qualname`` of a module-level trainer function."""
    module, name = getattr(trainer, "__module__", None), getattr(trainer, "__qualname__", None)
    if not module or not name or "<" in name:
        raise ConfigurationError(f"a trainer must be a module-level function (it is recorded by import path), got {trainer!r}")
    return f"{module}:{name}"


def resolve_trainer(path: str) -> Trainer:
    """The trainer a run manifest names (``module:function``)."""
    module, _, name = path.partition(":")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot import trainer {path!r}: {exc}") from exc
    if not callable(found):
        raise ConfigurationError(f"trainer {path!r} is not callable")
    return found  # type: ignore[no-any-return]


def run_manifest(
    *,
    model: str,
    trainer: str,
    ref: str,
    manifest_hash: str,
    code: Mapping[str, Any],
    environment: Mapping[str, Any],
    parameters: Mapping[str, int],
    seed: int,
    metrics: Mapping[str, int | str],
    weights_hash: str,
) -> dict[str, Any]:
    return {
        "format": RUN_FORMAT,
        "model": model,
        "trainer": trainer,
        "realization": {"ref": ref, "manifest_hash": manifest_hash},
        "code": dict(code),
        "environment": dict(environment),
        "parameters": dict(parameters),
        "seed": seed,
        "metrics": dict(metrics),
        "weights_hash": weights_hash,
    }


def run_intent(
    *,
    model: str,
    trainer: str,
    ref: str,
    manifest_hash: str | None,
    code: Mapping[str, Any],
    environment: Mapping[str, Any],
    parameters: Mapping[str, int],
    seed: int,
) -> dict[str, Any]:
    """What a run records at its start (state INTENT): the run manifest without metrics and weights."""
    return {
        "model": model,
        "trainer": trainer,
        "realization": {"ref": ref, "manifest_hash": manifest_hash},
        "code": dict(code),
        "environment": dict(environment),
        "parameters": dict(parameters),
        "seed": seed,
    }


def completed_run(intent: Mapping[str, Any], *, metrics: Mapping[str, int | str], weights_hash: str) -> dict[str, Any]:
    """The run manifest at the end (state COMPLETE): the intent plus format, metrics and weights hash (same shape as :func:`run_manifest`)."""
    return {**dict(intent), "format": RUN_FORMAT, "metrics": dict(metrics), "weights_hash": weights_hash}


def run_manifest_hash(doc: Mapping[str, Any]) -> str:
    return canonical_json.sha256_hex(doc)


def model_of(run: Mapping[str, Any]) -> str:
    """The model name a run manifest records."""
    return str(run.get("model") or LEGACY_MODEL)


def trainer_of(run: Mapping[str, Any]) -> str:
    """The trainer import path a run manifest records."""
    return str(run.get("trainer") or LEGACY_TRAINER)
