"""Runs a destructive command in a real subprocess and SIGKILLs itself at a chosen point (kill-safety tests).

    python kill_worker.py gc STEP -- <dsv gc apply arguments>
    python kill_worker.py privacy STEP -- <dsv privacy delete arguments>
    python kill_worker.py publish STEP REQUEST_ID SEED

The backends come from the ``DSV_*`` environment, as for ``dsv`` itself. ``gc``
and ``privacy`` run the real CLI command (``dsv_platform.cli.main.main``) with
a hook that kills the process:

* gc: ``plan`` (the plan is made, nothing applied), ``expired`` (after the
  first realization is marked EXPIRED: mid-commit), ``object_deleted`` (after
  the second object deletion: mid-delete), ``done`` (everything applied);
* privacy: ``plan`` (planned, nothing applied), ``outcome`` (after the first
  recorded outcome: mid-delete), ``commit`` (every outcome recorded, the request
  not completed: mid-commit), ``canonical`` (right after the first row-level
  delete of a canonical table commits: mid canonical stage);
* publish: a :class:`BuildStep` value of the build protocol.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dsv_platform.adapters.registry.privacy import PrivacyRecords
from dsv_platform.bootstrap import build_platform
from dsv_platform.services.publication.publisher import BuildStep, Publisher
from dsv_platform.services.retention import gc as gc_service
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import publisher_worker as pw

ROWS = 40


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def after_calls(fn: Callable[..., Any], count: int) -> Callable[..., Any]:
    """``fn``, which kills the process after its ``count``-th call returns."""
    seen = {"n": 0}

    def wrapped(*args: Any, **kw: Any) -> Any:
        out = fn(*args, **kw)
        seen["n"] += 1
        if seen["n"] >= count:
            die()
        return out

    return wrapped


def arm_gc(step: str) -> None:
    real = gc_service.apply_plan
    counts = {"expired": 1, "object_deleted": 2, "done": 1}

    def apply_plan(plan: Any, **kw: Any) -> Any:
        if step == "plan":
            die()
        seen = {"n": 0}

        def on_step(name: str, detail: str) -> None:
            if name == step:
                seen["n"] += 1
                if seen["n"] >= counts[step]:
                    die()

        return real(plan, **kw, on_step=on_step)

    gc_service.apply_plan = apply_plan


def arm_privacy(step: str) -> None:
    from dsv_platform.services.privacy.privacy import PrivacyCoordinator

    if step == "plan":
        PrivacyCoordinator.apply = lambda self, plan, **kw: die()  # type: ignore[method-assign,assignment]
    elif step == "outcome":
        PrivacyRecords.record_outcome = after_calls(PrivacyRecords.record_outcome, 1)  # type: ignore[method-assign]
    elif step == "commit":
        PrivacyRecords.complete_request = lambda self, request_id: die()  # type: ignore[method-assign]
    elif step == "canonical":
        from dsv_platform.adapters.iceberg.iceberg import CanonicalTables

        CanonicalTables.delete_rows = after_calls(CanonicalTables.delete_rows, 1)  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown privacy step {step!r}")


def publish(step: str | None, request_id: str, seed: int) -> int:
    """Publish ``pw.NAME:pw.VERSION`` from the rows of ``seed`` (logical key ``lk-<seed>``) into the platform's encrypting store."""

    def on_step(s: BuildStep, detail: str) -> None:
        if s.value == step:
            die()

    with build_platform(load_settings()) as platform:
        req = pw.request(request_id, logical_key=f"lk-{seed}", parts=pw.partitions(rows=ROWS, seed=seed))
        Publisher(platform.registry, platform.store, actor="builder", on_step=on_step).build(req)
    return 0


def main(argv: Sequence[str]) -> int:
    command, step = argv[0], argv[1]
    if command == "publish":
        return publish(step if step != "-" else None, argv[2], int(argv[3]))
    rest = list(argv[argv.index("--") + 1 :])
    if command == "gc":
        arm_gc(step)
        rest = ["gc", "apply", *rest]
    elif command == "privacy":
        arm_privacy(step)
        rest = ["privacy", "delete", *rest]
    from dsv_platform.cli.main import main as dsv

    return dsv(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
