"""(s) Scale: a generated source of the seed's shape (string keys, daily files, an as-of joined feature table), built end to end.

    python -m benchmarks.bench_scale --rows 1000000 [--code OTHER_TREE]

For one size, in one run: ``dsv ingest`` rows/s and peak RSS, ``dsv build`` wall time and peak RSS, the realization read back
through ``open_dataset(...).iter_batches`` (rows/s, peak RSS), and the same
as-of join done by DuckDB alone (``ASOF LEFT JOIN``, written to Parquet) plus ``dsv hash`` of its output, whose
content hash must equal the build's. ``--code`` runs the dsv commands from another source tree as well (PYTHONPATH),
e.g. an older commit checked out as a worktree, so two versions are compared on the same data in the same run.
Each command is a subprocess; its peak RSS is RUSAGE_CHILDREN of a wrapper whose only child it is.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import load_1min
from benchmarks.scale_source import contract, write_config

DATA = Path(__file__).resolve().parent / ".data" / "scale"
DSV = str(Path(sys.executable).with_name("dsv"))
DAYS = 30
def generate(rows: int, folder: Path) -> Path:
    """Daily Parquet files of events and three feature days, deterministic; the configuration folder beside them."""
    if (folder / "done").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    write_config(folder / "config")
    (folder / "contract.yaml").write_text(contract())
    rng = np.random.default_rng(1)
    accounts, per_day = max(1000, rows // 50), rows // DAYS
    data = folder / "data"
    data.mkdir()
    for d in range(DAYS):
        day = dt.date(2026, 6, 1) + dt.timedelta(days=d)
        ids = np.arange(d * per_day, (d + 1) * per_day)
        secs = rng.integers(0, 86400, per_day).astype("timedelta64[s]")
        events = pa.table({
            "event_id": pa.array(np.char.add("evt-", np.char.zfill(ids.astype(str), 12))),
            "account_id": pa.array(np.char.add("acct-", np.char.zfill(rng.integers(0, accounts, per_day).astype(str), 8))),
            "event_time": pa.array((np.datetime64(day.isoformat()) + secs).astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
            "event_day": pa.array([day] * per_day, pa.date32()),
            "amount": pa.array(np.round(rng.random(per_day) * 100, 4)),
        })  # fmt: skip
        pq.write_table(events, data / f"events-{day}.parquet")
    names = pa.array(np.char.add("acct-", np.char.zfill(np.arange(accounts).astype(str), 8)))
    for day in (dt.date(2026, 5, 31), dt.date(2026, 6, 10), dt.date(2026, 6, 20)):
        features = pa.table({"account_id": names, "valid_from": pa.array([day] * accounts, pa.date32()), "risk": pa.array(np.round(rng.random(accounts), 4))})
        pq.write_table(features, data / f"features-{day}.parquet")
    (folder / "done").write_text("")
    return folder


def measured(cmd: list[str], env: dict[str, str], log: Path | None = None) -> dict[str, Any]:
    """Wall time, peak RSS (MiB) and output of ``cmd`` run as the only child of a fresh wrapper process.

    With ``log``, the command's whole stderr (its progress lines: the stage breakdown) is written there as it runs.
    """
    err = f"open({str(log)!r}, 'w')" if log else "subprocess.PIPE"
    wrapper = (
        "import resource, subprocess, sys, json; "
        f"e = {err}; "
        f"p = subprocess.run({cmd!r}, stdout=subprocess.PIPE, stderr=e, text=True); "
        "tail = p.stderr[-2000:] if p.stderr else open(e.name).read()[-2000:]; "
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': tail, 'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))"
    )
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    if doc["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({doc['rc']}): {doc['err']}")
    return {"wall_s": round(wall, 2), "peak_rss_mib": round(doc["rss"] / 1024), "out": doc["out"]}


READ = """
import json, time
import dsv_platform
start, rows = time.perf_counter(), 0
with dsv_platform.open_dataset("scale_set:v1", purpose="benchmark") as ds:
    for batch in ds.iter_batches(batch_size=65536):
        rows += batch.num_rows
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - start}))
"""
"""Training code's read: every row of the realization through ``open_dataset(...).iter_batches``, each object verified."""


def dsv_run(folder: Path, tree: str | None, label: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    home = folder / f"home-{label}"
    shutil.rmtree(home, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(home), "DSV_CONFIG_DIR": str(folder / "config")}
    env |= extra or {}
    if tree:
        env["PYTHONPATH"] = tree
    data = sorted((folder / "data").glob("*.parquet"))
    features = measured([DSV, "ingest", "features", *[str(p) for p in data if p.name.startswith("features")]], env, folder / f"{label}-ingest-features.log")
    events = measured([DSV, "ingest", "events", *[str(p) for p in data if p.name.startswith("events")]], env, folder / f"{label}-ingest-events.log")
    build = measured([DSV, "build", "scale_set:v1", "--json"], env, folder / f"{label}-build.log")
    doc = json.loads(build["out"])
    read = measured([sys.executable, "-c", READ], env, folder / f"{label}-read.log")
    streamed = json.loads(read["out"])
    rows = sum(pq.read_metadata(p).num_rows for p in data if p.name.startswith("events"))
    return {
        "ingest_rows_per_s": round(rows / events["wall_s"]),
        "ingest_peak_rss_mib": max(features["peak_rss_mib"], events["peak_rss_mib"]),
        "build_wall_s": build["wall_s"],
        "build_peak_rss_mib": build["peak_rss_mib"],
        "content_hash": doc["content_hash"],
        "rows": doc["rows"],
        "iter_batches_rows_per_s": round(streamed["rows"] / streamed["seconds"]),
        "iter_batches_peak_rss_mib": read["peak_rss_mib"],
        "iter_batches_rows": streamed["rows"],
    }


def duckdb_baseline(folder: Path) -> dict[str, Any]:
    """The same as-of join in DuckDB, to Parquet, then `dsv hash` of its output with the dataset's contract."""
    import duckdb

    out = folder / "duckdb-out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    data = folder / "data"
    start = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"""
        COPY (
          SELECT e.event_id, e.account_id, e.event_time, e.event_day, e.amount, f.risk
          FROM read_parquet('{data}/events-*.parquet') e
          ASOF LEFT JOIN (SELECT account_id, CAST(valid_from AS TIMESTAMPTZ) AS valid_at, risk FROM read_parquet('{data}/features-*.parquet')) f
            ON e.account_id = f.account_id AND e.event_time >= f.valid_at
        ) TO '{out}/joined.parquet' (FORMAT PARQUET)
    """)  # fmt: skip
    join_s = time.perf_counter() - start
    cmd = [DSV, "hash", str(out / "joined.parquet"), "--contract", str(folder / "contract.yaml"), "--json"]
    hashed = measured(cmd, dict(os.environ), folder / "duckdb-hash.log")
    digest = json.loads(hashed["out"])["content_hash"]
    return {"join_s": round(join_s, 2), "hash_s": hashed["wall_s"], "hash_peak_rss_mib": hashed["peak_rss_mib"], "content_hash": digest}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--code", help="another source tree to run the dsv commands from as well (PYTHONPATH)")
    p.add_argument("--arrow", action="store_true", help="also build with DSV_BUILD_ENGINE=arrow (the in-memory assembly), in its own home")
    p.add_argument(
        "--stages",
        default="baseline,this",
        help="comma-separated stages to run now (baseline, this); a stage's result is kept in the data folder, so a long "
        "size can be run in parts and the report joins the kept results",
    )
    args = p.parse_args(argv)
    stages = set(args.stages.split(","))
    folder = generate(args.rows, DATA / str(args.rows))
    report: dict[str, Any] = {"rows": args.rows, "load_before": load_1min()}
    for stage, run in (
        ("baseline", lambda: duckdb_baseline(folder)),
        ("this", lambda: dsv_run(folder, None, "this")),
        ("other", lambda: dsv_run(folder, args.code, "other")),
        ("arrow", lambda: dsv_run(folder, None, "arrow", {"DSV_BUILD_ENGINE": "arrow"})),
    ):
        kept = folder / f"result-{stage}.json"
        if stage in stages or (stage == "other" and args.code) or (stage == "arrow" and args.arrow):
            kept.write_text(json.dumps(run() | {"load_after_stage": load_1min()}))
        if kept.exists():
            report["duckdb" if stage == "baseline" else stage] = json.loads(kept.read_text())
    if "duckdb" in report and "this" in report:
        base = report["duckdb"]["join_s"] + report["duckdb"]["hash_s"]
        report["build_vs_duckdb_plus_hash"] = round(report["this"]["build_wall_s"] / base, 2)
        report["hashes_equal"] = report["this"]["content_hash"] == report["duckdb"]["content_hash"]
    report["load_after"] = load_1min()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
