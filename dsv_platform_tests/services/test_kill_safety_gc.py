"""Issue 11 item 5: `dsv gc apply` SIGKILLed (a real subprocess) at several points, on the embedded local backends.

After each kill, rerunning the command completes, and the registry and the
object store agree: the integrity scan (services/retention/integrity.py) finds nothing
missing and nothing orphaned beyond the safety window (kill_support.py has the
checks; test_kill_safety_production.py runs a subset on PostgreSQL + S3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform_tests.services import kill_support as ks

pytestmark = pytest.mark.slow

STEPS = ["plan", "expired", "object_deleted"]  # after the plan, mid-commit (realizations EXPIRED), mid-delete


@pytest.mark.parametrize("step", STEPS)
def test_gc_apply_killed_then_rerun_converges(step: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ks.check_gc_apply_killed(ks.local_env(tmp_path), step, monkeypatch)
