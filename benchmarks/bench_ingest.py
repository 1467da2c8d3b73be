"""(s) Ingest alone on bench_scale's generated source: `dsv ingest` rows/s (wall and CPU) and peak RSS, one tree or two.

    python -m benchmarks.bench_ingest --rows 1000000 [--code OTHER_TREE]

CPU seconds (user + system of the dsv process) are reported beside wall time: on a shared machine they move
far less with the load than the wall clock does. ``--code`` runs the same ingest from another source tree
(PYTHONPATH) in the same run, e.g. main checked out as a worktree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from benchmarks.bench_scale import DATA, DSV, generate
from benchmarks.common import load_1min


def _run(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    wrapper = (
        "import resource, subprocess, json, time; t = time.perf_counter(); "
        f"p = subprocess.run({[DSV, *args]!r}, capture_output=True, text=True); wall = time.perf_counter() - t; "
        "r = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(json.dumps({'rc': p.returncode, 'wall': wall, 'cpu': r.ru_utime + r.ru_stime, 'rss': r.ru_maxrss // 1024, 'err': p.stderr[-1000:]}))"
    )
    done = subprocess.run([sys.executable, "-c", wrapper], env=env, capture_output=True, text=True, check=True)
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if doc["rc"] != 0:
        raise SystemExit(f"dsv {' '.join(args[:2])} failed ({doc['rc']}): {doc['err']}")
    return doc


def ingest(folder: Path, tree: str | None, label: str) -> dict[str, Any]:
    """Features, then the 30 event files, into a fresh home; the events' figures."""
    home = folder / f"home-ingest-{label}"
    shutil.rmtree(home, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")} | {"DSV_HOME": str(home), "DSV_CONFIG_DIR": str(folder / "config")}
    if tree:
        env["PYTHONPATH"] = tree
    data = sorted((folder / "data").glob("*.parquet"))
    _run(["ingest", "features", *[str(p) for p in data if p.name.startswith("features")]], env)
    events = _run(["ingest", "events", *[str(p) for p in data if p.name.startswith("events")]], env)
    rows = sum(pq.read_metadata(p).num_rows for p in data if p.name.startswith("events"))
    return {
        "wall_s": round(events["wall"], 2),
        "cpu_s": round(events["cpu"], 2),
        "rows_per_s": round(rows / events["wall"]),
        "rows_per_cpu_s": round(rows / events["cpu"]),
        "peak_rss_mib": events["rss"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--code", help="another source tree to ingest from as well (PYTHONPATH)")
    args = p.parse_args(argv)
    folder = generate(args.rows, DATA / str(args.rows))
    report: dict[str, Any] = {"rows": args.rows, "load_before": load_1min(), "this": ingest(folder, None, "this")}
    if args.code:
        report["other"] = ingest(folder, args.code, "other")
    report["load_after"] = load_1min()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
