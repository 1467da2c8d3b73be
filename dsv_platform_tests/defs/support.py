"""Test support shared by the adapter and defs tests: embedded Settings rooted in a temporary folder, drop-folder batches."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.defs import build_defs
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.settings import Settings, load_settings

ROWS_PER_DAY = 200
FRAUD_SOURCES = ("transactions", "chargebacks", "account_features")


def settings_at(home: Path) -> Settings:
    """The embedded default under ``home`` (never the process environment)."""
    return load_settings({}).with_home(home)


Env = tuple[Settings, dg.Definitions, dg.DagsterInstance]


@contextmanager
def dagster_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """The embedded default under ``tmp_path/dsv``, its Definitions, and an ephemeral Dagster instance (``DAGSTER_HOME`` beside it)."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    settings = settings_at(tmp_path / "dsv")
    with dg.DagsterInstance.ephemeral() as instance:
        yield settings, build_defs(settings), instance


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
    return {RANGE_START: str(first), RANGE_END: str(last)}
