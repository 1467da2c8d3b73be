"""Partitions shared by the asset graph."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from dsv_platform.domain.generator import START
from dsv_platform.domain.labels import LABEL_DEFINITIONS

daily_partitions = dg.DailyPartitionsDefinition(start_date=START.isoformat())
label_version_partitions = dg.StaticPartitionsDefinition([f"v{v}" for v in sorted(LABEL_DEFINITIONS)])


def partition_day(context: dg.AssetExecutionContext) -> dt.date:
    return dt.date.fromisoformat(context.partition_key)
