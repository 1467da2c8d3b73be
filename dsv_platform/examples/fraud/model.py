"""A small fraud model: numpy logistic regression, trained deterministically from a seed.

Metrics are integers (basis points) or strings so that the run manifest is
canonical JSON; :func:`train_run` is the trainer the platform records and reruns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core import canonical_json
from dsv_platform.core.reproduction.model_run import TrainedModel, TrainingData

FEATURES = ("amount", "card_present", "merchant_risk", "txn_count_7d", "amount_sum_7d", "card_present_ratio_7d")
TARGET = "is_fraud"
MODEL_NAME = "fraud_model"
SMOKE_EPOCHS = 5


@dataclass(frozen=True)
class TrainingParameters:
    epochs: int = 300
    learning_rate_milli: int = 100
    l2_micro: int = 100

    def to_document(self) -> dict[str, int]:
        return {"epochs": self.epochs, "learning_rate_milli": self.learning_rate_milli, "l2_micro": self.l2_micro}


@dataclass(frozen=True)
class LogisticModel:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def predict(self, table: pa.Table) -> np.ndarray:
        x = (design_matrix(table, self.features) - self.mean) / self.scale
        return np.asarray(1.0 / (1.0 + np.exp(-(x @ self.weights + self.bias))), dtype=np.float64)

    def weights_hash(self) -> str:
        values = [f"{v:.12e}" for v in [*self.mean, *self.scale, *self.weights, self.bias]]
        return canonical_json.sha256_hex({"features": list(self.features), "values": values})


def design_matrix(table: pa.Table, features: Sequence[str] = FEATURES) -> np.ndarray:
    """Features as float64 columns; nulls become 0."""
    cols = []
    for name in features:
        col = pc.fill_null(pc.cast(table.column(name), pa.float64()), 0.0)
        cols.append(np.asarray(col.to_numpy(), dtype=np.float64))
    return np.column_stack(cols) if cols else np.zeros((table.num_rows, 0))


def train(table: pa.Table, *, seed: int, parameters: TrainingParameters = TrainingParameters(), features: Sequence[str] = FEATURES) -> LogisticModel:
    """Full-batch gradient descent with L2; the seed sets the initial weights (same seed, same model)."""
    x = design_matrix(table, features)
    y = np.asarray(pc.cast(table.column(TARGET), pa.float64()).to_numpy(), dtype=np.float64)
    mean = x.mean(axis=0) if len(x) else np.zeros(x.shape[1])
    scale = x.std(axis=0) if len(x) else np.ones(x.shape[1])
    scale = np.where(scale > 0, scale, 1.0)
    z = (x - mean) / scale
    rng = np.random.Generator(np.random.PCG64(seed))
    w = rng.normal(0.0, 0.01, z.shape[1])
    b = 0.0
    lr, l2 = parameters.learning_rate_milli / 1000, parameters.l2_micro / 1_000_000
    for _ in range(parameters.epochs):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        grad = p - y
        w -= lr * (z.T @ grad / max(len(y), 1) + l2 * w)
        b -= lr * float(grad.mean()) if len(y) else 0.0
    return LogisticModel(tuple(features), mean, scale, w, b)


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve by ranks (ties averaged); None with a single class."""
    pos, neg = int(labels.sum()), int(len(labels) - labels.sum())
    if pos == 0 or neg == 0:
        return None
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[labels.astype(bool)].sum() - pos * (pos + 1) / 2) / (pos * neg))


def evaluate(model: LogisticModel, table: pa.Table) -> dict[str, int | str]:
    """Rows, positives, AUC and accuracy at 0.5 in basis points, log loss as text."""
    y = np.asarray(pc.cast(table.column(TARGET), pa.float64()).to_numpy(), dtype=np.float64)
    p = np.clip(model.predict(table), 1e-12, 1 - 1e-12) if table.num_rows else np.zeros(0)
    area = auc(p, y)
    loss = float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()) if len(y) else 0.0
    return {
        "rows": len(y),
        "positives": int(y.sum()),
        "auc_bp": -1 if area is None else round(area * 10_000),
        "accuracy_bp": round(float(((p >= 0.5) == (y == 1)).mean()) * 10_000) if len(y) else 0,
        "log_loss": f"{loss:.6f}",
    }


def train_run(data: TrainingData) -> TrainedModel:
    """The platform's trainer interface (:mod:`dsv_platform.core.reproduction.model_run`) over :func:`train` and :func:`evaluate`.

    ``data.parameters`` are :class:`TrainingParameters` fields; ``smoke`` trains :data:`SMOKE_EPOCHS` epochs.
    """
    params = TrainingParameters(**{k: int(v) for k, v in data.parameters.items()})
    if data.smoke:
        params = TrainingParameters(SMOKE_EPOCHS, params.learning_rate_milli, params.l2_micro)
    model = train(data.train, seed=data.seed, parameters=params)
    metrics = evaluate(model, data.validation) if not data.smoke else {}
    return TrainedModel(model.weights_hash(), metrics, finite=bool(np.all(np.isfinite(model.weights))))


TRAINER = train_run
"""The fraud model's trainer, as ``services.model_run.train_model(..., trainer=TRAINER)`` takes it."""
