"""A dataset build in bounded memory: ``dsv build`` under a memory cgroup far below what the in-memory assembly needs.

The canonical tables are filled through the Iceberg adapter (landing is tested elsewhere), then
the build runs as its own process in a fresh memory cgroup: the out-of-core engine finishes under
the cap with the content hash of the rows, and the in-memory assembly of the same inputs is
killed by it, which shows the cap is below what the data takes in memory.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.scale_source import write_config
from dsv_platform.bootstrap import build_platform
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.fixtures.memory_cap import run_capped

ROWS, DAYS, ACCOUNTS = 720_000, 30, 40_000
CAP = 1024 << 20
FILLER = "a free-text note as wide as a real one, " * 40  # 1.6 kB a row: about 1.2 GB of base rows in memory, above the cap
NOTE = "  - {name: note, type: string}\n"
"""The wide column appended to the scale events."""


def _fill(home: Path, config: Path) -> int:
    """Append the generated rows; returns the base rows' size in memory (Arrow bytes)."""
    platform = build_platform(dataclasses.replace(settings_at(home), config_dir=config))
    rng = np.random.default_rng(3)
    per_day, recorded = ROWS // DAYS, dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
    names = np.char.add("acct-", np.char.zfill(np.arange(ACCOUNTS).astype(str), 8))
    valid_from = pa.array([dt.date(2026, 5, 31)] * ACCOUNTS, pa.date32())
    features = pa.table({"account_id": names, "valid_from": valid_from, "risk": np.round(rng.random(ACCOUNTS), 4)})
    platform.tables.append(platform.config.sources["features"], features, recorded_at=recorded, batch="raw_batch:features")
    size = 0
    for d in range(DAYS):
        day = dt.date(2026, 6, 1) + dt.timedelta(days=d)
        ids = np.arange(d * per_day, (d + 1) * per_day).astype(str)
        seconds = rng.integers(0, 86_400, per_day).astype("timedelta64[s]")
        events = pa.table({
            "event_id": np.char.add("evt-", np.char.zfill(ids, 12)),
            "account_id": names[rng.integers(0, ACCOUNTS, per_day)],
            "event_time": pa.array((np.datetime64(day.isoformat()) + seconds).astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
            "event_day": pa.array([day] * per_day, pa.date32()),
            "amount": np.round(rng.random(per_day) * 100, 4),
            "note": np.char.add(FILLER, ids),  # wide rows: the base table alone is larger in memory than the cap
        })  # fmt: skip
        platform.tables.append(platform.config.sources["events"], events, recorded_at=recorded, batch=f"raw_batch:events-{day}")
        size += events.nbytes
    return size


def test_a_build_finishes_under_a_memory_cap_the_in_memory_assembly_exceeds(tmp_path: Path) -> None:
    home, config = tmp_path / "home", write_config(tmp_path / "config", extra_columns=NOTE, versions=("v1", "v2"))
    base_bytes = _fill(home, config)
    assert base_bytes > CAP  # the base rows alone do not fit under the cap
    dsv = str(Path(sys.executable).with_name("dsv"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(home), "DSV_CONFIG_DIR": str(config)}
    bounded = run_capped([dsv, "build", "scale_set:v1", "--json"], CAP, env=env | {"DSV_BUILD_MEMORY": "192MiB", "DSV_BUILD_JOBS": "1"})
    assert bounded.returncode == 0, bounded.stderr[-2000:]
    built = json.loads(bounded.stdout)
    assert built["rows"] == ROWS and bounded.peak_bytes <= CAP
    in_memory = run_capped([dsv, "build", "scale_set:v2", "--json"], CAP, env=env | {"DSV_BUILD_ENGINE": "arrow", "DSV_BUILD_JOBS": "1"})
    assert in_memory.killed, f"the in-memory assembly fit under the cap (rc {in_memory.returncode}): the cap proves nothing"
