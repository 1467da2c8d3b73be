"""The GC policy: one validated value, read from ``platform.yaml`` (``gc:``), used by the CLI, the Dagster job and the integrity scan.

``gc: {safety_window_hours: 24, keep_heads: true}``. The safety window keeps anything newer than it (a
build in flight, a publication racing GC); ``keep_heads`` keeps each definition's newest readable
realization without a root. ``dsv gc plan --safety-window-hours H`` and the job's
``safety_window_hours`` override the window for one plan, through the same validation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError, check_keys
from dsv_platform.core.errors import DsvError

DEFAULT_SAFETY_WINDOW = timedelta(hours=24)
GC_KEYS = frozenset({"safety_window_hours", "keep_heads"})


class GcPolicyError(DsvError):
    """A GC policy value is unusable (a negative, infinite or non-numeric safety window)."""


@dataclass(frozen=True)
class GcPolicy:
    safety_window: timedelta = DEFAULT_SAFETY_WINDOW
    keep_heads: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.safety_window, timedelta) or self.safety_window < timedelta(0):
            raise GcPolicyError(f"GC safety window {self.safety_window!r}: must be a duration >= 0")

    def with_hours(self, hours: float | None, *, where: str = "safety_window_hours") -> GcPolicy:
        """This policy, its window replaced by ``hours`` when given (validated: a finite number >= 0)."""
        return self if hours is None else GcPolicy(safety_window_of(hours, where=where), self.keep_heads)

    @property
    def safety_window_hours(self) -> float:
        return self.safety_window.total_seconds() / 3600


def safety_window_of(hours: Any, *, where: str) -> timedelta:
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not math.isfinite(hours) or hours < 0:
        raise GcPolicyError(f"{where} {hours!r}: must be a finite number of hours >= 0")
    return timedelta(hours=hours)


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
    return GcPolicy(window, keep)


__all__ = ["DEFAULT_SAFETY_WINDOW", "GcPolicy", "GcPolicyError", "parse_gc_policy", "safety_window_of"]
