"""Module-level producers and trainers for the artifact and model-run tests (recorded by import path, so they live in a module)."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dsv_platform.core.config.timezones import zone
from dsv_platform.core.reproduction.model_run import TrainedModel, TrainingData

DATASET = "fraud_training_set:v6"


@dataclass(frozen=True)
class RowReport:
    """Counts the rows of the input and notes the TZ it ran under; renders an HTML page and a CSV with the footer."""

    name: str = "fraud_row_report"
    precision: Mapping[str, Any] = field(default_factory=lambda: {"default": "exact"})
    zones: tuple[str, ...] = ("Europe/Berlin",)
    runner_timezone: str = "Europe/Berlin"
    mode: str = "ok"  # "fail": raise in compute; "crash": the process dies in compute

    def compute(self, inputs: Mapping[str, pa.Table], parameters: Mapping[str, Any], seed: int) -> dict[str, Any]:
        if self.mode == "crash":
            os._exit(17)
        if self.mode == "fail":
            raise RuntimeError("the report's compute step failed on purpose")
        table = inputs[DATASET]
        dst = dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC).astimezone(zone("Europe/Berlin")).isoformat()
        return {
            "rows": str(table.num_rows),
            "columns": sorted(table.column_names),
            "tz_during_compute": os.environ.get("TZ"),
            "local_name": time.tzname[0],
            "after_dst_switch": dst,
            "scale": str(parameters.get("scale", 1)),
            "seed": seed,
        }

    def render(self, inputs: Mapping[str, pa.Table], results: Mapping[str, Any], footer: str) -> dict[str, bytes]:
        html = f"<html><body><p>{results['rows']} rows</p><footer>{footer}</footer></body></html>"
        return {"report.html": html.encode(), "rows.csv": f"rows\n{results['rows']}\n# {footer}\n".encode()}


PRODUCER = RowReport()
FAILING = RowReport(name="fraud_failing_report", mode="fail")
CRASHING = RowReport(name="fraud_crashing_report", mode="crash")


def exploding_trainer(data: TrainingData) -> TrainedModel:
    """A trainer that fails after the run was recorded (what a crashed training looks like to the registry)."""
    raise RuntimeError(f"training diverged on {data.train.num_rows} rows")


def crashing_trainer(data: TrainingData) -> TrainedModel:
    """A trainer whose process dies mid-training (no exception handler runs)."""
    os._exit(19)
