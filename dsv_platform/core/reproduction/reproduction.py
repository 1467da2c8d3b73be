"""The audit procedure's vocabulary and comparisons (pure: no storage, no clock).

``reproduce`` (services/reproduction/reproduce.py) runs the steps and collects
:class:`Check` values; this module decides the honest outcome from them,
compares a rerun's output with the recorded one within a stated tolerance,
diffs environment lockfiles, and picks the rotating rehearsal sample.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication.failures import FAILURES

T = TypeVar("T")


class Outcome(enum.Enum):
    """What an audit (or a rehearsal) concluded about one manifest."""

    REPRODUCED = "REPRODUCED"  # every input re-hashed, the step's output matched
    REPRODUCED_AFTER_REBUILD = "REPRODUCED_AFTER_REBUILD"  # an input had to be rebuilt from raw first
    NOT_REPRODUCIBLE_DIRTY = "NOT_REPRODUCIBLE_DIRTY"  # built from uncommitted code: not reproducible by construction
    MISSING_COMMIT = "MISSING_COMMIT"  # the recorded code commit does not exist here
    NOT_REPRODUCIBLE_NO_LOCK = "NOT_REPRODUCIBLE_NO_LOCK"  # the commit holds no lock, or not the one recorded: no environment to rebuild
    ENVIRONMENT_DRIFT = "ENVIRONMENT_DRIFT"  # the environment lockfile differs (the diff is in the record)
    EXPIRED = "EXPIRED"  # an input was collected and cannot be rebuilt
    REDACTED = "REDACTED"  # an input was redacted by a privacy deletion (never rebuilt)
    CORRUPT = "CORRUPT"  # an object no longer hashes to its name and was not rebuilt
    NOT_FOUND = "NOT_FOUND"  # no manifest by that reference or hash
    UNTRUSTED = "UNTRUSTED"  # the publisher's signed statement is missing or does not verify (docs/trust.md): never read
    HASH_MISMATCH = "HASH_MISMATCH"  # a rebuild or a rerun gave different bytes / metrics beyond tolerance
    RERUN_FAILED = "RERUN_FAILED"  # the recorded code raised in the restored environment: nothing to compare

    @property
    def reconstructable(self) -> bool:
        return self in (Outcome.REPRODUCED, Outcome.REPRODUCED_AFTER_REBUILD)


# Most damning first: the first failing outcome in this order is the verdict.
PRECEDENCE: tuple[Outcome, ...] = (
    Outcome.NOT_FOUND,
    Outcome.UNTRUSTED,
    Outcome.REDACTED,
    Outcome.NOT_REPRODUCIBLE_DIRTY,
    Outcome.MISSING_COMMIT,
    Outcome.NOT_REPRODUCIBLE_NO_LOCK,
    Outcome.EXPIRED,
    Outcome.CORRUPT,
    Outcome.RERUN_FAILED,
    Outcome.HASH_MISMATCH,
    Outcome.ENVIRONMENT_DRIFT,
)

_FROM_FAILURE = {f.kind: Outcome(f.audit) for f in FAILURES if f.audit is not None}


def outcome_of_failure(kind: FailureKind) -> Outcome:
    """The audit outcome of a typed resolution failure: its row of the failure table (ACCESS_DENIED, QUARANTINED: NOT_FOUND)."""
    return _FROM_FAILURE[kind]


@dataclass(frozen=True)
class Check:
    """One step of the procedure: its name, whether it passed, the outcome it implies when not, and what it saw."""

    step: str
    passed: bool
    failure: Outcome | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_document(self) -> dict[str, Any]:
        return {"step": self.step, "passed": self.passed, "failure": None if self.failure is None else self.failure.value, "detail": dict(self.detail)}


def decide(checks: Sequence[Check], *, rebuilt: Sequence[str] = ()) -> Outcome:
    """The verdict: the most damning failed check, else REPRODUCED (AFTER_REBUILD when something was rebuilt)."""
    failed = {c.failure for c in checks if not c.passed and c.failure is not None}
    for outcome in PRECEDENCE:
        if outcome in failed:
            return outcome
    if not checks:
        return Outcome.NOT_FOUND
    return Outcome.REPRODUCED_AFTER_REBUILD if rebuilt else Outcome.REPRODUCED


# ---------------------------------------------------------------- environments


@dataclass(frozen=True)
class EnvironmentDiff:
    """How the current package list differs from the recorded one (``name``: recorded -> current)."""

    recorded_hash: str
    current_hash: str
    changed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    recorded_python: str = ""
    current_python: str = ""
    recorded_list_available: bool = True

    @property
    def drifted(self) -> bool:
        return self.recorded_hash != self.current_hash or self.recorded_python != self.current_python

    def summary(self) -> str:
        if not self.drifted:
            return "identical"
        parts = [f"{n} {a} -> {b}" for n, (a, b) in sorted(self.changed.items())]
        parts += [f"+{n}" for n in self.added] + [f"-{n}" for n in self.removed]
        if self.recorded_python != self.current_python:
            parts.append(f"python {self.recorded_python} -> {self.current_python}")
        if not self.recorded_list_available:
            parts.append(f"recorded package list {self.recorded_hash[:12]} is not stored; only the hashes can be compared")
        return "; ".join(parts) or "lockfile hash differs"

    def to_document(self) -> dict[str, Any]:
        return {
            "recorded_hash": self.recorded_hash,
            "current_hash": self.current_hash,
            "changed": {n: list(v) for n, v in sorted(self.changed.items())},
            "added": list(self.added),
            "removed": list(self.removed),
            "recorded_python": self.recorded_python,
            "current_python": self.current_python,
            "summary": self.summary(),
        }


def _packages(lockfile: str) -> dict[str, str]:
    out = {}
    for line in lockfile.splitlines():
        name, _, version = line.strip().partition("==")
        if name:
            out[name] = version
    return out


def diff_environments(recorded_hash: str, recorded_python: str, current_hash: str, current_python: str, recorded: str | None, current: str) -> EnvironmentDiff:
    """Compare two ``name==version`` lockfiles (``recorded`` None: the recorded list was not kept)."""
    if recorded is None:
        return EnvironmentDiff(recorded_hash, current_hash, recorded_python=recorded_python, current_python=current_python, recorded_list_available=False)
    old, new = _packages(recorded), _packages(current)
    changed = {n: (old[n], new[n]) for n in sorted(old.keys() & new.keys()) if old[n] != new[n]}
    return EnvironmentDiff(
        recorded_hash,
        current_hash,
        changed,
        tuple(sorted(new.keys() - old.keys())),
        tuple(sorted(old.keys() - new.keys())),
        recorded_python,
        current_python,
    )


# ---------------------------------------------------------------- outputs and tolerance


@dataclass(frozen=True)
class Tolerance:
    """What a rerun may differ by: ``exact`` means the weights hash must match; else each metric within ``metrics_bp``."""

    exact: bool = True
    metrics_bp: Mapping[str, int] = field(default_factory=dict)

    def to_document(self) -> dict[str, Any]:
        return {"exact": self.exact, "metrics_bp": dict(self.metrics_bp)}

    @classmethod
    def from_document(cls, doc: Mapping[str, Any] | None) -> Tolerance:
        if not doc:
            return cls()
        return cls(bool(doc.get("exact", True)), {str(k): int(v) for k, v in dict(doc.get("metrics_bp", {})).items()})


@dataclass(frozen=True)
class OutputComparison:
    matched: bool
    exact: bool
    needed_bp: Mapping[str, int]  # per metric, the tolerance the rerun needed
    differences: Mapping[str, tuple[Any, Any]]

    def to_document(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "exact": self.exact,
            "tolerance_needed_bp": dict(self.needed_bp),
            "differences": {k: list(v) for k, v in self.differences.items()},
        }


def compare_outputs(
    recorded_weights: str, recorded_metrics: Mapping[str, Any], weights: str, metrics: Mapping[str, Any], tolerance: Tolerance
) -> OutputComparison:
    """Exact when the weights hashes match; otherwise every differing integer metric must be within its tolerance."""
    keys = sorted(set(recorded_metrics) | set(metrics))
    differences = {k: (recorded_metrics.get(k), metrics.get(k)) for k in keys if recorded_metrics.get(k) != metrics.get(k)}
    exact = recorded_weights == weights and not differences
    if exact:
        return OutputComparison(True, True, {}, {})
    needed = {k: abs(int(a) - int(b)) for k, (a, b) in differences.items() if isinstance(a, int) and isinstance(b, int)}
    if tolerance.exact:
        return OutputComparison(False, False, needed, differences)
    within = all(k in tolerance.metrics_bp and needed.get(k, 10**9) <= tolerance.metrics_bp[k] for k in differences if k != "log_loss")
    return OutputComparison(within, False, needed, differences)


# ---------------------------------------------------------------- rehearsal sampling


def rotating_sample(items: Sequence[T], day_number: int, period_days: int) -> list[T]:
    """The items due on ``day_number``: item i is due when ``i % period == day % period`` (every item once per period)."""
    if period_days < 1:
        raise ValueError(f"period_days must be at least 1, got {period_days}")
    return [item for i, item in enumerate(items) if i % period_days == day_number % period_days]


def reconstructable_fraction(outcomes: Iterable[Outcome]) -> float:
    """Share of outcomes that are reconstructable (1.0 for none: nothing retained is nothing broken)."""
    seen = list(outcomes)
    return sum(o.reconstructable for o in seen) / len(seen) if seen else 1.0
