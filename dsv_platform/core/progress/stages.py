"""Progress of long work (a build, an ingest): named stages, each with a count done and an optional total.

Services take a :class:`Progress` (default :data:`SILENT`); the CLI draws it on stderr, the Dagster
assets write one ``context.log.info`` line per stage. :class:`StageLines` is the shared line form:
``<stage>: <n> <unit> in <s> s (<rate> <unit>/s)``. :func:`fan_out` reports to several at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Progress(Protocol):
    """A stage starts with :meth:`stage` (ending the previous one), counts with :meth:`advance`, ends with :meth:`done`."""

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None: ...

    def advance(self, n: int = 1) -> None: ...

    def done(self) -> None: ...


class Silent:
    """Reports nothing (what a service gets when no reporter is given)."""

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:
        pass


SILENT: Progress = Silent()


def stage_line(name: str, count: int, total: int | None, unit: str, seconds: float) -> str:
    """``read inputs: 1,440,000/1,440,000 rows in 2.10 s (685,714 rows/s)``; ``publish: done in 0.04 s`` when nothing was counted."""
    if count == 0 and total is None:
        return f"{name}: done in {seconds:.2f} s"
    done = f"{count:,}/{total:,}" if total is not None else f"{count:,}"
    rate = f" ({count / seconds:,.0f} {unit}/s)" if seconds > 0 and count else ""
    return f"{name}: {done} {unit} in {seconds:.2f} s{rate}"


class StageLines:
    """One line per stage through ``emit`` when it ends (and ``started`` lines when ``starts``); safe to advance from threads."""

    def __init__(self, emit: Callable[[str], None], *, prefix: str = "", starts: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.emit, self.prefix, self.starts, self.clock = emit, prefix, starts, clock
        self._lock = threading.Lock()
        self._name: str | None = None
        self._total: int | None = None
        self._unit = "rows"
        self._count = 0
        self._began = 0.0

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None:
        self.done()
        with self._lock:
            self._name, self._total, self._unit, self._count, self._began = name, total, unit, 0, self.clock()
        if self.starts:
            self.emit(f"{self.prefix}{name}: started" + (f" ({total:,} {unit})" if total is not None else ""))

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self._count += n

    def done(self) -> None:
        with self._lock:
            name, self._name = self._name, None
            line = stage_line(name, self._count, self._total, self._unit, self.clock() - self._began) if name is not None else None
        if line is not None:
            self.emit(self.prefix + line)


class _FanOut:
    def __init__(self, reporters: tuple[Progress, ...]) -> None:
        self.reporters = reporters

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None:
        for r in self.reporters:
            r.stage(name, total, unit)

    def advance(self, n: int = 1) -> None:
        for r in self.reporters:
            r.advance(n)

    def done(self) -> None:
        for r in self.reporters:
            r.done()


def fan_out(*reporters: Progress | None) -> Progress:
    """Every given reporter at once (None and :data:`SILENT` dropped; none left: :data:`SILENT`)."""
    kept = tuple(r for r in reporters if r is not None and r is not SILENT)
    if not kept:
        return SILENT
    return kept[0] if len(kept) == 1 else _FanOut(kept)


__all__ = ["SILENT", "Progress", "Silent", "StageLines", "fan_out", "stage_line"]
