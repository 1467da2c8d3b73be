"""A progress bar on a terminal, silence elsewhere."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


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
