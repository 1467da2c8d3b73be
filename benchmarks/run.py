"""Run every benchmark: ``python -m benchmarks.run [--rows N] [--only a,b,...] [--markdown FILE]``.

Data is generated deterministically on first use under benchmarks/.data/
(git-ignored). Each result is a ratio measured within one run, so it holds on
the machine it ran on; docs/benchmarks.md records one full run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks import bench_contract, bench_diff, bench_dvc, bench_memory, bench_naive, bench_ratio, bench_splits, bench_startup
from benchmarks.common import Result, machine
from benchmarks.data import DATA_DIR, dataset

BENCHMARKS = {
    "a": bench_ratio,
    "b": bench_naive,
    "c": bench_dvc,
    "d": bench_splits,
    "e": bench_memory,
    "f": bench_diff,
    "s": bench_contract,
    "t": bench_startup,
}


def render(results: list[Result], facts: dict[str, str], rows: int, seconds: float) -> str:
    lines = [f"Run: {facts['date']}, {rows:,} rows, {facts['cores']} cores, {facts['cpu']}, {facts['memory']}, "
             f"Python {facts['python']}, pyarrow {facts['pyarrow']}, numpy {facts['numpy']}; whole run {seconds:.0f} s.", ""]
    for r in results:
        lines += [f"### {r.name}", "", "| ratio | target | met |", "|---|---|---|", f"| {r.ratio:.2f}x | {r.target} | {'yes' if r.met else 'no'} |", ""]
        lines += [f"- {k}: {v}" for k, v in r.details.items()]
        if r.note:
            lines.append(f"- note: {r.note}")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run")
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the generated transactions table (default 10M)")
    parser.add_argument("--only", default="a,b,c,d,e,f,s,t", help="comma-separated benchmark letters")
    parser.add_argument("--markdown", type=Path, help="also write the results as Markdown to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    dataset(args.rows)
    results = []
    for letter in args.only.split(","):
        result = BENCHMARKS[letter.strip()].run(args.rows)
        print(f"{result.name}: {result.ratio:.2f}x (target {result.target}, {'met' if result.met else 'NOT met'}) {json.dumps(result.details)}", flush=True)
        results.append(result)
    facts = machine()
    text = render(results, facts, args.rows, time.perf_counter() - started)
    (DATA_DIR / f"results-{args.rows}.json").write_text(json.dumps({"machine": facts, "results": [r.__dict__ for r in results]}, indent=2))
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
