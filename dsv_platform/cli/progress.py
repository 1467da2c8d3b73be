"""Progress on stderr: a bar on a terminal; a long command's stages as bars there, else one line per stage."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dsv_platform.core.progress.stages import Progress, StageLines


@contextmanager
def row_progress(description: str, total: int | None = None, *, enabled: bool | None = None) -> Iterator[Callable[[int], None] | None]:
    """Yield an ``advance(rows)`` callback drawing a bar on stderr when it is a terminal, else ``None``."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=description, unit="rows", unit_scale=True, file=sys.stderr, leave=False) as bar:
        yield bar.update


class BarStages:
    """:class:`~dsv_platform.core.progress.stages.Progress` as one tqdm bar per stage on stderr (a terminal); each bar stays when its stage ends."""

    def __init__(self) -> None:
        self._bar: Any = None

    def stage(self, name: str, total: int | None = None, unit: str = "rows") -> None:
        from tqdm import tqdm

        self.done()
        self._bar = tqdm(total=total, desc=name, unit=f" {unit}" if unit else " steps", unit_scale=unit == "rows", file=sys.stderr, leave=True)

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def done(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()


def stage_progress(*, tty: bool | None = None) -> Progress:
    """A long command's progress on stderr: tqdm bars on a terminal, else one line per stage as it ends (stdout stays the result)."""
    if tty is None:
        tty = sys.stderr.isatty()
    if tty:
        return BarStages()
    return StageLines(lambda line: print(f"dsv: {line}", file=sys.stderr, flush=True))
