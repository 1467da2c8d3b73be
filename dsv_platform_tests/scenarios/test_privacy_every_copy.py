"""Issue 11 items 3 and 4: a privacy deletion reaches every copy of a subject, and the embedded default is owner-only.

A realization build is SIGKILLed (a real subprocess) right after it staged a
part; then one subject is deleted. No byte of the subject's identifier may be
left anywhere under the data home: objects, staging, landing, keys, Iceberg
data and metadata files, the registry, the landing index, Dagster logs. The
same scan finds the identifier before the deletion, so the test can fail.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.compute as pc
import pytest

from dsv_platform.adapters.objects.encrypted_store import STAGED_MAGIC
from dsv_platform.core.privacy.privacy import Outcome
from dsv_platform.core.retention.gc_plan import Action
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.privacy.privacy import build_coordinator
from dsv_platform.services.privacy.privacy_sweep import holds_subject
from dsv_platform.services.retention import gc
from dsv_platform_tests.scenarios.support import World

REPO = Path(__file__).resolve().parents[2]


def files_holding(home: Path, needle: bytes) -> list[str]:
    """Every file under ``home`` (SQLite WAL and journals included) whose bytes contain ``needle``."""
    found = []
    for dirpath, _, names in os.walk(home):
        for name in names:
            path = Path(dirpath, name)
            if path.is_file() and needle in path.read_bytes():
                found.append(str(path.relative_to(home)))
    return sorted(found)


def kill_build_after_first_part(home: Path, tmp: Path) -> str:
    marker = tmp / "staged"
    cmd = [sys.executable, "-m", "dsv_platform_tests.scenarios.privacy_build_worker", str(home), str(marker)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the build never staged a part: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return marker.read_text().strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("every-copy") / "home")


def test_the_embedded_default_is_owner_only(world: World) -> None:
    world.build("v5")  # the other test kills a v6 build
    home = world.settings.home
    loose = []
    for dirpath, _dirs, names in os.walk(home):
        for entry in [dirpath, *(os.path.join(dirpath, n) for n in names)]:
            if stat.S_IMODE(os.stat(entry).st_mode) & 0o077:
                loose.append(f"{oct(stat.S_IMODE(os.stat(entry).st_mode))} {os.path.relpath(entry, home)}")
    assert (home / "warehouse").is_dir() and any((home / "objects").rglob("*"))
    assert not loose, loose[:20]


def test_a_deleted_subject_is_nowhere_under_the_home(world: World, tmp_path: Path) -> None:
    home = world.settings.home
    staged = kill_build_after_first_part(home, tmp_path)
    attempt, _, name = staged.partition("/")
    staged_path = home / "objects" / "staging" / attempt / name
    assert staged_path.read_bytes().startswith(STAGED_MAGIC)  # the killed build's part is sealed, not plaintext

    accounts = world.tables.table(SOURCES["transactions"]).scan(selected_fields=("account_id",)).to_arrow().column("account_id")
    in_part = world.platform.store.get_staged(attempt, name)
    candidates = sorted(str(a) for a in pc.unique(accounts).to_pylist())
    candidates.sort(key=lambda a: not holds_subject(in_part, a))  # prefer a subject the killed build staged
    subject = next((a for a in candidates if files_holding(home, a.encode())), None)
    assert subject is not None, "no account id is visible in any file before the deletion: the scan would prove nothing"
    before = files_holding(home, subject.encode())

    report = build_coordinator(world.platform).delete(subject, "gdpr art. 17")

    outcomes = {(o["kind"], o["outcome"]) for o in report.outcomes}
    assert ("raw_batch", Outcome.CRYPTO_ERASED.value) in outcomes
    assert all(o["outcome"] != Outcome.DELETED.value for o in report.outcomes if o["kind"] == "raw_batch")
    marks = [r for r in world.zone.records() if r.redacted]
    assert marks, "the landing index records the redaction"
    assert holds_subject(in_part, subject), "the killed build staged the subject's rows"
    assert not staged_path.exists(), "the staged part holding the subject is erased and removed"
    left = files_holding(home, subject.encode())
    assert not left, f"{subject} still in {left} (before the deletion: {before})"


def test_gc_abandons_a_killed_builds_staging_after_the_safety_window(tmp_path: Path) -> None:
    w = World.create(tmp_path / "home", days=2)
    p = w.platform
    attempt = kill_build_after_first_part(p.home, tmp_path).partition("/")[0]
    inside = gc.plan(p.registry, p.store, tables=p.tables, landing=p.landing)
    assert attempt not in {d.id for d in inside.collectable(Action.ABANDON_STAGING.value)}, "a build may still be in flight"
    later = gc.plan(p.registry, p.store, tables=p.tables, landing=p.landing, now=datetime.now(UTC) + timedelta(days=2))
    assert attempt in {d.id for d in later.collectable(Action.ABANDON_STAGING.value)}
    report = gc.apply_plan(later, registry=p.registry, store=p.store, tables=p.tables, dry_run=False)
    assert attempt in report.staging_abandoned
    assert attempt not in {a.attempt_id for a in p.store.list_staging()}
