"""Issue 22 item 4: `dsv ingest` of a batch whose in-memory size is well above a memory cap lands and loads it under the cap.

A 5M-row Parquet batch (99 MB on disk, 30 daily partitions) is ingested by the real `dsv` process under
RLIMIT_DATA = 2 GiB. Read whole, the batch does not fit: preparing it in one piece (`prepare_batch`, as
`dsv ingest` did three times per file before) fails under the same cap, while the streamed ingest passes
(record batches; what still grows with the file is encryption's whole object, about 4x its bytes).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.scale_source import write_config
from dsv_platform_tests.fixtures.cli_runner import DSV

pytestmark = pytest.mark.slow  # about 45 s of CPU

ROWS = 5_000_000
DAYS = 30
CAP = 2 << 30
CONTROL = """import sys
from pathlib import Path
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.ingest.batch import prepare_batch
spec = load_config(Path(sys.argv[1])).sources["events"]
print(prepare_batch(Path(sys.argv[2]).read_bytes(), spec).accepted.num_rows)
"""


def write_batch(folder: Path) -> tuple[Path, Path]:
    config = write_config(folder / "config", versions=())
    rng = np.random.default_rng(7)
    ids = np.arange(ROWS)
    days = np.datetime64("2026-06-01") + (ids * DAYS // ROWS).astype("timedelta64[D]")
    table = pa.table({
        "event_id": pa.array(np.char.add("evt-", np.char.zfill(ids.astype(str), 12))),
        "account_id": pa.array(np.char.add("acct-", np.char.zfill(rng.integers(0, 20_000, ROWS).astype(str), 8))),
        "event_time": pa.array((days + rng.integers(0, 86_400, ROWS).astype("timedelta64[s]")).astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
        "event_day": pa.array(days.astype("datetime64[D]"), pa.date32()),
        "amount": pa.array(np.round(rng.random(ROWS) * 100, 4)),
    })  # fmt: skip
    pq.write_table(table, folder / "events.parquet")
    return config, folder / "events.parquet"


def capped() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (CAP, CAP))


def test_a_batch_larger_than_the_cap_is_ingested_under_it(tmp_path):
    config, batch = write_batch(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}
    whole = subprocess.run([sys.executable, "-c", CONTROL, str(config), str(batch)], env=env, capture_output=True, text=True, preexec_fn=capped, timeout=600)
    assert whole.returncode != 0, "the cap must be below what the batch needs in memory when read whole"
    done = subprocess.run([DSV, "ingest", "events", str(batch), "--json"], env=env, capture_output=True, text=True, preexec_fn=capped, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    (report,) = json.loads(done.stdout)["files"]
    assert report["rows_accepted"] == ROWS and report["rows_rejected"] == 0 and len(report["days"]) == DAYS
    files = str(tmp_path / "home" / "warehouse" / "canonical" / "events" / "data" / "*" / "*.parquet")
    stored = duckdb.sql(f"SELECT count(*), count(DISTINCT event_id) FROM read_parquet('{files}', hive_partitioning = false)").fetchone()
    assert stored == (ROWS, ROWS), "every accepted row is in the canonical table's files, once (each record batch its own file)"
