"""Test support shared by the adapter and defs tests: embedded Settings rooted in a temporary folder, drop-folder batches."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from pathlib import Path

from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.settings import Settings, load_settings

ROWS_PER_DAY = 200
FRAUD_SOURCES = ("transactions", "chargebacks", "account_features")


def settings_at(home: Path) -> Settings:
    """The embedded default under ``home`` (never the process environment)."""
    return load_settings({}).with_home(home)


def drop(folder: Path, batches: Iterable[RawBatch]) -> list[str]:
    """Write ``batches`` into the drop ``folder`` as a source would (modified when recorded); their file names."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for b in batches:
        path = folder / b.file_name
        path.write_bytes(b.data)
        os.utime(path, (b.recorded_at.timestamp(), b.recorded_at.timestamp()))
        names.append(b.file_name)
    return names


def range_tags(first: dt.date | str, last: dt.date | str) -> dict[str, str]:
    """The tags making one run over a partition range (single-run backfill policy)."""
    return {"dagster/asset_partition_range_start": str(first), "dagster/asset_partition_range_end": str(last)}
