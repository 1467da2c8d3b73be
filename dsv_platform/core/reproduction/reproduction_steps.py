"""The seven steps of reproducing an artifact, each with its outcome, and the verdict they imply (pure).

``services/reproduction/reproduce_artifact.py`` runs the steps; a step that could not run is SKIPPED with the reason,
never silently passed. A rebuild from raw that reproduces the results (step 6) supersedes the input
failure that called for it (step 3) and the rerun it made impossible (step 5).

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.core.reproduction.reproduction import PRECEDENCE, Outcome

TITLES: Mapping[int, str] = {
    1: "locate the manifest",
    2: "restore the code and the environment",
    3: "resolve and re-hash every input",
    4: "pin the runner timezone and tz database",
    5: "rerun with the recorded parameters and seed, compare",
    6: "on an input mismatch, rebuild from raw and compare",
    7: "write the reproduction record",
}


class StepStatus(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Step:
    """One numbered step: its status, a one-line summary, the outcome it implies when failed, and what it saw."""

    number: int
    status: StepStatus
    summary: str
    failure: Outcome | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return TITLES[self.number]

    @property
    def passed(self) -> bool:
        return self.status is StepStatus.PASSED

    def to_document(self) -> dict[str, Any]:
        return {
            "step": self.number,
            "title": self.title,
            "status": self.status.value,
            "summary": self.summary,
            "failure": None if self.failure is None else self.failure.value,
            "detail": dict(self.detail),
        }


def passed(number: int, summary: str, **detail: Any) -> Step:
    return Step(number, StepStatus.PASSED, summary, None, detail)


def failed(number: int, failure: Outcome, summary: str, **detail: Any) -> Step:
    return Step(number, StepStatus.FAILED, summary, failure, detail)


def skipped(number: int, why: str, **detail: Any) -> Step:
    return Step(number, StepStatus.SKIPPED, why, None, detail)


def verdict(steps: Sequence[Step]) -> Outcome:
    """The most damning failure that still stands, else REPRODUCED (AFTER_REBUILD when step 6 reproduced it)."""
    rebuilt = any(s.number == 6 and s.passed for s in steps)
    standing = {s.failure for s in steps if s.status is StepStatus.FAILED and s.failure is not None and not (rebuilt and s.number in (3, 5))}
    for outcome in PRECEDENCE:
        if outcome in standing:
            return outcome
    if standing:
        return sorted(standing, key=lambda o: o.value)[0]
    if not any(s.number == 5 and s.passed for s in steps) and not rebuilt:
        return Outcome.NOT_FOUND if not steps or not steps[0].passed else Outcome.HASH_MISMATCH
    return Outcome.REPRODUCED_AFTER_REBUILD if rebuilt else Outcome.REPRODUCED
