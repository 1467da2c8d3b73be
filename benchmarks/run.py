"""Run every benchmark: ``python -m benchmarks.run [--rows N] [--only a,b,...] [--gc-scale S] [--markdown FILE]``.

Data is generated deterministically on first use under benchmarks/.data/
(git-ignored). Each result is a ratio measured within one run, so it holds on
the machine it ran on; the 1-minute load average is recorded before and after
every benchmark. docs/benchmarks.md records one full run.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import (
    bench_catalog,
    bench_clients,
    bench_contract,
    bench_diff,
    bench_dvc,
    bench_gc,
    bench_history,
    bench_memory,
    bench_naive,
    bench_partitions,
    bench_ratio,
    bench_splits,
    bench_startup,
)
from benchmarks.common import Result, load_1min, machine
from benchmarks.data import DATA_DIR, dataset

BENCHMARKS = {
    "a": bench_ratio,
    "b": bench_naive,
    "c": bench_dvc,
    "d": bench_splits,
    "e": bench_memory,
    "f": bench_diff,
    "m": bench_partitions,
    "g": bench_gc,
    "s": bench_contract,
    "t": bench_startup,
    "k": bench_catalog,
    "l": bench_history,
    "u": bench_clients,
}


def _load_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def render(results: list[Result], facts: dict[str, str], rows: int, seconds: float, loads: list[float]) -> str:
    """Markdown: the run's header line, a summary table of every result, then one section per benchmark."""
    load = f"load average (1 min) {min(loads):.1f} to {max(loads):.1f}" if loads else "load average n/a"
    lines = [
        f"Run: {facts['date']}, {rows:,} rows, {facts['cores']} cores, {facts['cpu']}, {facts['memory']}, "
        f"Python {facts['python']}, pyarrow {facts['pyarrow']}, numpy {facts['numpy']}; whole run {seconds:.0f} s; {load}.",
        "",
        "| benchmark | ratio | target | met |",
        "|---|---:|---|---|",
    ]
    lines += [f"| {r.name} | {r.ratio:.2f}x | {r.target} | {'yes' if r.met else 'no'} |" for r in results]
    lines.append("")
    for r in results:
        lines += [f"### {r.name}", "", f"Ratio {r.ratio:.2f}x, target {r.target}: {'met' if r.met else 'not met'}.", ""]
        lines += [f"- {k}: {v}" for k, v in r.details.items()]
        if r.note:
            lines.append(f"- note: {r.note}")
        lines.append("")
    return "\n".join(lines)


def run_one(bench: Callable[[int], Result], rows: int, loads: list[float]) -> Result:
    """One benchmark, with the load average before and after it in its details (and appended to ``loads``)."""
    before = load_1min()
    result = bench(rows)
    after = load_1min()
    result.details["load_avg"] = f"{_load_text(before)} -> {_load_text(after)}"
    loads += [x for x in (before, after) if x is not None]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the generated transactions table (default 10M)")
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated benchmark letters (default: all)")
    parser.add_argument("--gc-scale", type=float, default=1.0, help="size of the GC benchmark (g): 1.0 = 1M objects (default)")
    parser.add_argument("--markdown", type=Path, help="also write the results as Markdown to this file")
    args = parser.parse_args()
    runners: dict[str, Callable[[int], Result]] = {letter: module.run for letter, module in BENCHMARKS.items()}
    runners["g"] = functools.partial(bench_gc.run, scale=args.gc_scale)
    started = time.perf_counter()
    dataset(args.rows)
    results: list[Result] = []
    loads: list[float] = []
    for letter in args.only.split(","):
        result = run_one(runners[letter.strip()], args.rows, loads)
        print(f"{result.name}: {result.ratio:.2f}x (target {result.target}, {'met' if result.met else 'NOT met'}) {json.dumps(result.details)}", flush=True)
        results.append(result)
    facts = machine()
    text = render(results, facts, args.rows, time.perf_counter() - started, loads)
    summary = {"machine": facts, "load_avg_min_max": [min(loads), max(loads)] if loads else None, "results": [r.__dict__ for r in results]}
    (DATA_DIR / f"results-{args.rows}.json").write_text(json.dumps(summary, indent=2))
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
