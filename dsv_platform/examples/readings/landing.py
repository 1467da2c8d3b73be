"""Land the generator's batches and load the canonical partitions they touch, as `dsv ingest` does."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

from dsv_platform.bootstrap import Platform
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.ingest.batch import RawBatch, prepare_batch
from dsv_platform.services.ingest.canonical_load import PartitionLoad, load_partition


def partition_days(batches: Iterable[RawBatch], sources: Mapping[str, SourceSpec]) -> dict[str, list[dt.date]]:
    """Per source, the partition days the batches' rows touch (run one partition per day, not a range of empty days)."""
    days: dict[str, set[dt.date]] = {}
    for batch in batches:
        spec = sources[batch.source]
        rows = prepare_batch(batch.data, spec).accepted
        days.setdefault(batch.source, set()).update(rows.column(spec.contract.partition_by).to_pylist())
    return {source: sorted(found) for source, found in sorted(days.items())}


def land_and_load(platform: Platform, batches: Iterable[RawBatch]) -> list[PartitionLoad]:
    """Land every batch write-once in the raw zone, then load each touched canonical partition once (sorted)."""
    touched: set[tuple[str, dt.date]] = set()
    for batch in batches:
        spec = platform.config.sources[batch.source]
        touched |= {(batch.source, record.day) for record in platform.landing.land_all(batch, spec)}
    return [load_partition(platform, platform.config.sources[source], day) for source, day in sorted(touched)]
