"""The GC policy: one validated value, read from ``platform.yaml`` (``gc:``), used by the CLI, the Dagster job and the integrity scan.

``gc: {safety_window_hours: 24, keep_heads: true, max_ref_age_days: 30}``. The safety window keeps anything newer
than it (a build in flight, a publication racing GC); ``keep_heads`` keeps each definition's newest readable
realization without a root; ``max_ref_age_days``: how long a report's or model's pin outlives its retention
(dependent_pins.py). ``dsv gc plan --safety-window-hours H`` and the job's ``safety_window_hours`` override the window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError, check_keys
from dsv_platform.core.errors import DsvError

DEFAULT_SAFETY_WINDOW = timedelta(hours=24)
DEFAULT_MAX_REF_AGE = timedelta(days=30)
MAX_REF_AGE_DAYS = 3650  # the retained pins' own ref age (dependent_pins.RETAINED_REF_AGE_MS): a longer one would never age out
GC_KEYS = frozenset({"safety_window_hours", "keep_heads", "max_ref_age_days"})


class GcPolicyError(DsvError):
    """A GC policy value is unusable (a negative, infinite or non-numeric safety window or max ref age)."""


@dataclass(frozen=True)
class GcPolicy:
    safety_window: timedelta = DEFAULT_SAFETY_WINDOW
    keep_heads: bool = True
    max_ref_age: timedelta = DEFAULT_MAX_REF_AGE

    def __post_init__(self) -> None:
        if not isinstance(self.safety_window, timedelta) or self.safety_window < timedelta(0):
            raise GcPolicyError(f"GC safety window {self.safety_window!r}: must be a duration >= 0")
        if not isinstance(self.max_ref_age, timedelta) or self.max_ref_age < timedelta(0):
            raise GcPolicyError(f"GC max ref age {self.max_ref_age!r}: must be a duration >= 0")

    def with_hours(self, hours: float | None, *, where: str = "safety_window_hours") -> GcPolicy:
        """This policy, its window replaced by ``hours`` when given (validated: a finite number >= 0)."""
        return self if hours is None else replace(self, safety_window=safety_window_of(hours, where=where))

    @property
    def safety_window_hours(self) -> float:
        return self.safety_window.total_seconds() / 3600


def safety_window_of(hours: Any, *, where: str) -> timedelta:
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours) or hours < 0:
        raise GcPolicyError(f"{where} {hours!r}: must be a finite number of hours >= 0")
    return timedelta(hours=hours)


def max_ref_age_of(days: Any, *, where: str) -> timedelta:
    if isinstance(days, bool) or not isinstance(days, (int, float)) or not math.isfinite(days) or days < 0 or days > MAX_REF_AGE_DAYS:
        raise GcPolicyError(f"{where} {days!r}: must be a finite number of days from 0 to {MAX_REF_AGE_DAYS}")
    return timedelta(days=days)


def parse_gc_policy(doc: Mapping[str, Any] | Any, *, file: Path) -> GcPolicy:
    """The ``gc:`` mapping of ``platform.yaml``; every key optional."""
    doc = check_keys(doc, file=file, where="gc", allowed=GC_KEYS)
    keep = doc.get("keep_heads", True)
    if not isinstance(keep, bool):
        raise ConfigError(f"must be true or false, got {keep!r}", file=file, key="gc.keep_heads")
    try:
        window = safety_window_of(doc["safety_window_hours"], where="gc.safety_window_hours") if "safety_window_hours" in doc else DEFAULT_SAFETY_WINDOW
    except GcPolicyError as exc:
        raise ConfigError(str(exc).removeprefix("gc.safety_window_hours "), file=file, key="gc.safety_window_hours") from exc
    try:
        ref_age = max_ref_age_of(doc["max_ref_age_days"], where="gc.max_ref_age_days") if "max_ref_age_days" in doc else DEFAULT_MAX_REF_AGE
    except GcPolicyError as exc:
        raise ConfigError(str(exc).removeprefix("gc.max_ref_age_days "), file=file, key="gc.max_ref_age_days") from exc
    return GcPolicy(window, keep, ref_age)


__all__ = [
    "DEFAULT_MAX_REF_AGE",
    "DEFAULT_SAFETY_WINDOW",
    "MAX_REF_AGE_DAYS",
    "GcPolicy",
    "GcPolicyError",
    "max_ref_age_of",
    "parse_gc_policy",
    "safety_window_of",
]
