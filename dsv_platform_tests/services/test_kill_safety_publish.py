"""Issue 11 item 5: A publication SIGKILLed (a real subprocess) at several points, on the embedded local backends.

After each kill, rerunning the command completes, and the registry and the
object store agree: the integrity scan (services/retention/integrity.py) finds nothing
missing and nothing orphaned beyond the safety window (kill_support.py has the
checks; test_kill_safety_production.py runs a subset on PostgreSQL + S3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.services.retention import integrity
from dsv_platform_tests.services import kill_support as ks
from dsv_platform_tests.services import publisher_worker as pw

pytestmark = pytest.mark.slow

STEPS = ["part_written", "sealed", "published"]  # mid-write, mid-commit (sealed, not published), published


@pytest.mark.parametrize("step", STEPS)
def test_publication_killed_then_rerun_converges(step: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ks.check_publication_killed(ks.local_env(tmp_path), step, monkeypatch)


@pytest.mark.parametrize("step", ["candidate", "sealed"])  # a STAGING, a SEALED candidate
def test_publication_killed_and_never_rerun_is_collected_by_gc(step: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = ks.local_env(tmp_path)
    ks.seed_world(env, seeds=(7,))
    ks.run_killed(env, "publish", step, "req-k", "8")
    with ks.platform(env) as p:
        assert any(o.startswith("candidate ") for o in integrity.scan(p, safety_window=ks.ZERO).orphaned)
    assert ks.rerun(monkeypatch, env, "gc", "apply", "--yes", "--safety-window-hours", "0") == 0
    ks.assert_consistent(env)
    with ks.platform(env) as p:
        states = sorted(r.state.value for r in p.registry.versions(pw.NAME, include_candidates=True))
        assert states == [ks.S.EXPIRED.value, ks.S.PUBLISHED.value], states
