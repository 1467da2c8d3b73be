"""One retry function: exponential backoff with full jitter (docs/reliability.md, "Retries").

Every place that retries a lost race (a conditional S3 write, an Iceberg commit, an alias
compare-and-swap) calls :func:`retry` instead of its own loop: ``attempt(n)`` runs with
n = 1..attempts; an exception ``again(exc)`` accepts is retried after a random delay in
[0, min(cap, base * 2**(n-1))] (full jitter: racing writers do not retry in lockstep);
anything else propagates at once. When every attempt lost, ``exhausted(last)`` is raised.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

BASE_S = 0.05
CAP_S = 2.0


def backoff_delay(attempt: int, *, base: float = BASE_S, cap: float = CAP_S, rng: Callable[[], float] = random.random) -> float:
    """The wait after failed attempt ``attempt`` (1-based): uniform in [0, min(cap, base * 2**(attempt-1))]."""
    return float(rng() * min(cap, base * 2.0 ** (attempt - 1)))


def retry(
    attempt: Callable[[int], T],
    *,
    attempts: int,
    again: Callable[[Exception], bool],
    exhausted: Callable[[Exception], Exception],
    on_retry: Callable[[int, Exception], None] | None = None,
    base: float = BASE_S,
    cap: float = CAP_S,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``attempt(n)``'s result for the first n that does not raise a retryable error; see the module docstring.

    ``on_retry(n, exc)`` runs before the wait that follows failed attempt n (reload what the race changed).
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}")
    for n in range(1, attempts + 1):
        try:
            return attempt(n)
        except Exception as exc:
            if not again(exc):
                raise
            if n == attempts:
                raise exhausted(exc) from exc
            if on_retry is not None:
                on_retry(n, exc)
            sleep(backoff_delay(n, base=base, cap=cap))
    raise AssertionError("unreachable")  # pragma: no cover
