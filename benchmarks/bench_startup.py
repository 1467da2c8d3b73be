"""(t) Start-up: wall time of `dsv --help`, `dsv resolve <ref>`, `dsv hash --help` / `python -c pass`.

`dsv resolve` reads a tiny published realization in a temporary DSV_HOME (made with the
platform's own publisher). Each command runs REPEAT times, interleaved; medians are reported
with the load average, and `python -X importtime` lists what `dsv resolve` still imports.
Run alone: ``python -m benchmarks.bench_startup``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Result

REPEAT = 7
HEAVY = ("dagster", "pyiceberg", "pyarrow", "pandas", "pandera")
TARGETS = {"dsv --help": 0.5, "dsv resolve": 1.0}  # seconds, on a quiet machine
DSV = str(Path(sys.executable).with_name("dsv"))


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def publish_tiny(home: Path) -> str:
    """A published 3-row realization in ``home``; returns its reference."""
    import pyarrow as pa

    from dsv_platform.bootstrap import build_platform
    from dsv_platform.core.contracts.contract import parse_contract
    from dsv_platform.services.publication.publisher import BuildRequest, Publisher
    from dsv_platform.settings import load_settings

    doc = {"name": "startup_bench", "key": ["id"], "columns": [{"name": "id", "type": "int64"}, {"name": "s", "type": "string"}]}
    contract = parse_contract(doc, source="benchmarks/bench_startup")
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": pa.array(["a", "b", "c"])})
    with build_platform(load_settings({"DSV_HOME": str(home)})) as platform:
        platform.registry.register_definition("startup_bench", "v1", contract=doc, recipe={"sources": []}, owner="bench")
        request = BuildRequest(dataset="startup_bench", version="v1", contract=contract, request_id="startup-1", partitions=[("all", table)])
        return Publisher(platform.registry, platform.store, actor="bench").build(request).ref


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "AWS_"))}
    return {**env, "DSV_HOME": str(home)}


def _time(argv: list[str], env: dict[str, str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    assert done.returncode == expect, (argv, done.returncode, done.stderr[-500:])
    return elapsed


def top_imports(argv: list[str], env: dict[str, str], n: int = 10) -> tuple[list[tuple[str, float]], list[str]]:
    """The ``n`` costliest top-level packages ``dsv argv`` imports (-X importtime, cumulative ms), and the HEAVY ones loaded."""
    code = "import sys; from dsv_platform.cli.main import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv], env=env, capture_output=True, text=True, timeout=300)
    cost: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        top = name.strip().split(".")[0]
        cost[top] = max(cost.get(top, 0.0), int(cumulative) / 1000)  # a package's outermost entry covers its submodules
    ranked = sorted(((k, v) for k, v in cost.items() if k not in ("dsv_platform", "site", "encodings")), key=lambda kv: -kv[1])
    return ranked[:n], [m for m in HEAVY if m in cost]


def measure(repeat: int = REPEAT) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="dsv-startup-") as tmp:
        home = Path(tmp) / "home"
        ref = publish_tiny(home)
        env = _env(home)
        cases = {
            "python -c pass": ([sys.executable, "-c", "pass"], 0),
            "dsv --help": ([DSV, "--help"], 0),
            "dsv resolve": ([DSV, "resolve", ref], 0),
            "dsv resolve (NOT_FOUND)": ([DSV, "resolve", "startup_bench:v9"], 3),
            "dsv hash --help": ([DSV, "hash", "--help"], 0),
        }
        load_before = _load()
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(repeat):  # interleaved: load changes hit every command alike
            for name, (argv, expect) in cases.items():
                times[name].append(_time(argv, env, expect))
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        top, heavy = top_imports(["resolve", ref], env)
        _, heavy_help = top_imports(["--help"], env)
    base = medians["python -c pass"]
    return {
        "ref": ref,
        "repeat": repeat,
        "median_s": {k: round(v, 3) for k, v in medians.items()},
        "ratio_to_python": {k: round(v / base, 2) for k, v in medians.items()},
        "load_average": f"{load_before} -> {_load()}",
        "resolve_top_imports_ms": {k: round(v) for k, v in top},
        "heavy_imported_by_resolve": heavy,
        "heavy_imported_by_help": heavy_help,
    }


def run(rows: int) -> Result:
    m = measure()
    medians: dict[str, float] = m["median_s"]  # type: ignore[assignment]
    ratios: dict[str, float] = m["ratio_to_python"]  # type: ignore[assignment]
    light = not m["heavy_imported_by_resolve"] and not m["heavy_imported_by_help"]
    met = light and all(medians[k] < limit for k, limit in TARGETS.items())
    return Result(
        name="t) start-up: `dsv resolve` wall time / `python -c pass`",
        ratio=ratios["dsv resolve"],
        target="--help < 0.5 s, resolve < 1 s (quiet machine); neither imports dagster, pyiceberg, pyarrow, pandas, pandera",
        met=met,
        details=m,
        note="" if met else "absolute targets hold on a quiet machine; see the ratios and load average",
    )


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else REPEAT), indent=2))
