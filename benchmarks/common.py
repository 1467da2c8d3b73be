"""Shared benchmark helpers: timing, machine facts, result records."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import pyarrow as pa


@dataclass
class Result:
    """One benchmark's outcome: a ratio measured in one run, its target and the details behind it."""

    name: str
    ratio: float
    target: str
    met: bool
    details: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def print_result(result: Result) -> None:
    """A benchmark run alone (``python -m benchmarks.bench_x``): its ratio against the target, then each detail."""
    print(f"{result.name}: {result.ratio:.3f}x (target {result.target})")
    for key, value in result.details.items():
        print(f"  {key}: {value}")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration):
        pass
    return {
        "date": date.today().isoformat(),
        "cpu": model,
        "cores": str(os.cpu_count()),
        "memory": mem,
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
    }


def load_1min() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None
