"""Partitions of the asset graph: daily from the configuration's start date, label versions by name."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import dagster as dg

from dsv_platform.core.config.source import UNPARTITIONED_DAY

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
"""The run tags making one run over a day range (the single-run backfill policy of the daily assets)."""


def daily_partitions(start: dt.date) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(start_date=start.isoformat())


def label_version_partitions(versions: Iterable[int]) -> dg.StaticPartitionsDefinition:
    return dg.StaticPartitionsDefinition([f"v{v}" for v in sorted(versions)])


def partition_days(context: dg.AssetExecutionContext) -> list[dt.date]:
    """The days of this run: one partition, every partition of a ranged (single-run backfill) run, or the one index day of an unpartitioned asset."""
    if context.assets_def.partitions_def is None:
        return [UNPARTITIONED_DAY]
    return [dt.date.fromisoformat(k) for k in context.partition_keys]


def partition_day(context: dg.AssetExecutionContext) -> dt.date:
    return dt.date.fromisoformat(context.partition_key)
