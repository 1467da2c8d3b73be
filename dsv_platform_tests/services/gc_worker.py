"""Runs GC apply in a process of its own and SIGKILLs itself at a step marker (crash tests)."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime, timedelta

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.services.retention import gc


def main(argv: list[str]) -> int:
    """``URL ROOT MARKER COUNT``: GC apply, killed by its own SIGKILL at the COUNT-th MARKER step (0 if it never comes)."""
    url, root, marker, count = argv[0], argv[1], argv[2], int(argv[3])
    reg, store = Registry.from_url(url), LocalObjectStore(root, fsync=False)
    seen = {"n": 0}

    def step(name: str, detail: str) -> None:
        if name == marker:
            seen["n"] += 1
            if seen["n"] >= count:
                os.kill(os.getpid(), signal.SIGKILL)

    plan = gc.plan(reg, store, now=datetime.now(UTC) + timedelta(days=2))
    gc.apply_plan(plan, registry=reg, store=store, dry_run=False, on_step=step)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
