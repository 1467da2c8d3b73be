"""How the readings demo prints a reproduction: the seven steps, each with its outcome, and the number compared."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.services.reproduction.reproduce import ReproductionReport

MARK = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}
DIRTY_NOTE = (
    "  the report was produced from a checkout with uncommitted changes, so step 2 refuses it: code that was never\n"
    "  committed cannot be checked out again (not reproducible by construction). Run the demo from a clean checkout\n"
    "  (a fresh clone is clean) to see the number reproduced; see README, 'What the demo shows'."
)


def numbers(results: Mapping[str, Any]) -> str:
    """The report's headline numbers on one line (canonical JSON values, as the manifest records them)."""
    return "; ".join(f"{k} {json.dumps(v, sort_keys=True)}" for k, v in sorted(results.items()))


def print_steps(report: ReproductionReport) -> None:
    """``dsv reproduce``'s seven steps: number, title, outcome, one-line summary."""
    for s in report.steps:
        print(f"  {s.number}. {MARK[s.status.value]} {s.title}: {s.summary}")
    for note in report.rebuilt:
        print(f"     rebuilt: {note}")
    print(f"  verdict: {report.outcome.value} (reproduction record {report.record_id})")


def rerun_results(report: ReproductionReport) -> Mapping[str, Any] | None:
    """The results the rerun computed, from the step (5, or 6 after a rebuild) that compared them with the recorded ones."""
    compared = [s for s in report.steps if s.number in (5, 6) and s.passed and "results" in s.detail]
    return dict(compared[-1].detail["results"]) if compared else None


def explain(report: ReproductionReport, recorded: Mapping[str, Any], produced_on: str) -> bool:
    """Print what the reproduction concluded; True when it is the honest answer (reproduced, or refused as dirty)."""
    rerun = rerun_results(report)
    if report.outcome.reconstructable and rerun is not None:
        print(f"\nproduced on {produced_on}: {numbers(recorded)}")
        print(f"rerun six months later: {numbers(rerun)}")
        print(f"  {'the same number' if rerun == recorded else 'equal at the stated precision'}: reproduced ({report.outcome.value})")
        return True
    if report.outcome is Outcome.NOT_REPRODUCIBLE_DIRTY:
        print(f"\nNOT_REPRODUCIBLE_DIRTY\n{DIRTY_NOTE}")
        return True
    print(f"\nNOT REPRODUCED: {report.outcome.value}: {report.reason}")
    return False
