"""A build whose rows are too wide for its engine budget stops with one line naming DSV_BUILD_MEMORY, and publishes nothing.

DuckDB spills joins, sorts and windows past its memory limit, but not every operator at every width: rows of several kB
under a small budget run it out of memory (seen at 3.2 kB rows and 192 MiB, `benchmarks`' scale shape). That is the
setting being too low for the data, an ENVIRONMENT failure that says which setting to raise, not an engine message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.scale_source import write_config
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.defs.support import settings_at

ROWS, ACCOUNTS, WIDTH = 16_000, 200, 4_000
NOTE = "  - {name: note, type: string}\n"


def _fill(home: Path, config: Path) -> None:
    platform = build_platform(dataclasses.replace(settings_at(home), config_dir=config))
    names = np.char.add("acct-", np.arange(ACCOUNTS).astype(str))
    valid_from = pa.array([dt.date(2026, 5, 31)] * ACCOUNTS, pa.date32())
    features = pa.table({"account_id": names, "valid_from": valid_from, "risk": np.linspace(0, 1, ACCOUNTS).round(4)})
    platform.tables.append(platform.config.sources["features"], features, recorded_at=dt.datetime(2026, 7, 1, tzinfo=dt.UTC), batch="raw_batch:features")
    ids = np.arange(ROWS).astype(str)
    events = pa.table({
        "event_id": np.char.add("evt-", np.char.zfill(ids, 8)),
        "account_id": names[np.arange(ROWS) % ACCOUNTS],
        "event_time": pa.array([dt.datetime(2026, 6, 1, 12, tzinfo=dt.UTC)] * ROWS, pa.timestamp("us", tz="UTC")),
        "event_day": pa.array([dt.date(2026, 6, 1)] * ROWS, pa.date32()),
        "amount": np.ones(ROWS),
        "note": np.char.add("x" * WIDTH, ids),  # 4 kB a row: 64 MB of base rows against a 64 MiB budget
    })  # fmt: skip
    platform.tables.append(platform.config.sources["events"], events, recorded_at=dt.datetime(2026, 7, 1, tzinfo=dt.UTC), batch="raw_batch:events")


def test_rows_too_wide_for_the_engine_budget_fail_naming_the_setting_and_publish_nothing(tmp_path: Path) -> None:
    home, config = tmp_path / "home", write_config(tmp_path / "config", extra_columns=NOTE, versions=("v1",))
    _fill(home, config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(home), "DSV_CONFIG_DIR": str(config)}
    dsv = str(Path(sys.executable).with_name("dsv"))
    small = env | {"DSV_BUILD_MEMORY": "64MiB", "DSV_BUILD_JOBS": "1"}
    built = subprocess.run([dsv, "build", "scale_set:v1", "--json"], env=small, capture_output=True, text=True, timeout=600)
    assert built.returncode == FailureKind.ENVIRONMENT.exit_code, built.stderr[-2000:]
    assert "needed more than its memory budget DSV_BUILD_MEMORY=64MiB" in built.stderr and "raise DSV_BUILD_MEMORY" in built.stderr
    assert "Traceback" not in built.stderr
    listed = subprocess.run([dsv, "versions", "scale_set", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert [r for r in json.loads(listed.stdout) if r.get("state") == "PUBLISHED"] == []
