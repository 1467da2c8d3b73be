"""Producing the quarterly consumption report artifact from one pinned readings_hourly:v1 realization."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.examples.readings import DATASET
from dsv_platform.examples.readings.report import PARAMETERS, PRODUCER, SEED
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.reproduction.artifacts import ArtifactRun, produce_artifact


def produce_report(
    platform: Platform,
    ref: str,
    *,
    clock: Callable[[], dt.datetime] | None = None,
    code: Mapping[str, Any] | None = None,
    actor: str | None = None,
) -> ArtifactRun:
    """The report of ``ref`` (a readings_hourly:v1 reference); its watermark is the realization's."""
    with open_dataset(platform, ref, actor=actor) as ds:
        watermark = ds.manifest.watermark
    return produce_artifact(
        platform, PRODUCER, inputs={DATASET: ref}, parameters=PARAMETERS, seed=SEED, watermark=watermark, clock=clock, code=code, actor=actor
    )
