"""The ``_splits`` check does not hold the assignment (issue 22): its Arrow peak is under half the assignment's size.

After a build, the ``_splits`` asset re-reads the stored assignment, re-hashes it and checks entity disjointness. Read
whole, that is every example's id, entity and split at once (~50 bytes a row, and several copies while it sorts and
hashes): at 10M rows it was the build command's peak RSS. Streamed into the engine, one row group at a time, its own
Arrow memory stays a few batches whatever the number of examples.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.scale_source import write_config
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization import build_realization, check_splits
from dsv_platform_tests.defs.support import settings_at

ROWS, DAYS, ACCOUNTS = 600_000, 3, 20_000


def _fill(platform: Platform) -> None:
    rng = np.random.default_rng(5)
    per_day, recorded = ROWS // DAYS, dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
    names = np.char.add("acct-", np.char.zfill(np.arange(ACCOUNTS).astype(str), 8))
    features = pa.table({"account_id": names, "valid_from": pa.array([dt.date(2026, 5, 31)] * ACCOUNTS, pa.date32()), "risk": rng.random(ACCOUNTS).round(4)})
    platform.tables.append(platform.config.sources["features"], features, recorded_at=recorded, batch="raw_batch:features")
    for d in range(DAYS):
        day = dt.date(2026, 6, 1) + dt.timedelta(days=d)
        events = pa.table({
            "event_id": np.char.add("evt-", np.char.zfill(np.arange(d * per_day, (d + 1) * per_day).astype(str), 12)),
            "account_id": names[rng.integers(0, ACCOUNTS, per_day)],
            "event_time": pa.array([dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC)] * per_day, pa.timestamp("us", tz="UTC")),
            "event_day": pa.array([day] * per_day, pa.date32()),
            "amount": rng.random(per_day).round(4),
        })  # fmt: skip
        platform.tables.append(platform.config.sources["events"], events, recorded_at=recorded, batch=f"raw_batch:events-{day}")


@pytest.mark.slow  # about 20 s on a loaded 2-core machine: a 600k-row build
def test_the_splits_check_streams_the_assignment(tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_at(tmp_path / "home"), config_dir=write_config(tmp_path / "config"))
    with build_platform(settings) as platform:
        _fill(platform)
        definition = platform.config.dataset("scale_set", "v1")
        built = build_realization(platform, definition)
        whole = open_dataset(platform, built.ref, actor=platform.actor).split_assignment
        assert whole is not None and whole.num_rows == ROWS
        previous = pa.default_memory_pool()
        pool = pa.proxy_memory_pool(previous)
        pa.set_memory_pool(pool)
        try:
            check = check_splits(platform, built.ref, definition)
        finally:
            pa.set_memory_pool(previous)
    assert check.report.passed and check.counts == built.split_counts
    assert pool.max_memory() < whole.nbytes / 2, f"the check's Arrow peak {pool.max_memory() >> 20} MiB, the whole assignment {whole.nbytes >> 20} MiB"
