"""Runs GC apply in a subprocess and SIGKILLs itself at a step marker (crash tests)."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime, timedelta

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.services.retention import gc


def main() -> None:
    url, root, marker, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    reg, store = Registry.from_url(url), LocalObjectStore(root, fsync=False)
    seen = {"n": 0}

    def step(name: str, detail: str) -> None:
        if name == marker:
            seen["n"] += 1
            if seen["n"] >= count:
                os.kill(os.getpid(), signal.SIGKILL)

    plan = gc.plan(reg, store, now=datetime.now(UTC) + timedelta(days=2))
    gc.apply_plan(plan, registry=reg, store=store, dry_run=False, on_step=step)


if __name__ == "__main__":
    main()
