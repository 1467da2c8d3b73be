"""Issue 25 item 10: on a full disk read-only commands still work, and a write is one line, exit 18 (ENVIRONMENT).

The home lives on a small tmpfs of its own (mounting needs root: skipped otherwise), filled to 0 bytes free.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication import failures
from dsv_platform_tests.fixtures.ci import unavailable
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True).returncode:
        unavailable("mounting a small tmpfs needs root", needs="the full-disk test: run as root, or with CAP_SYS_ADMIN")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path) -> None:
    fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    stat = os.statvfs(mount)
    assert stat.f_bavail * stat.f_frsize == 0


def test_read_only_commands_work_on_a_full_disk_and_a_write_is_one_line(small_disk, capsys, monkeypatch):
    world = World.create(small_disk / "home", rows_per_day=20, days=3)
    ref = world.build().ref
    world.platform.registry.close()
    _fill(small_disk)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(small_disk / "home")})
    verified = dsv("verify", ref)
    assert verified.code == 0, verified.err
    assert verified.out.startswith(f"OK {ref}")
    resolved = dsv("resolve", ref)
    assert resolved.code == 0 and resolved.out.startswith(ref), resolved.err
    status = dsv("status")
    assert status.code == 0 and "fraud_training_set:v6" in status.out, status.err
    moved = dsv("alias", "set", "fraud_training_set:v6@full", ref.split("@", 1)[1])
    assert moved.code == failures.exit_code(FailureKind.ENVIRONMENT) == 18
    [line] = moved.err.strip().splitlines()
    assert line.startswith("dsv: error: ") and "the disk is full" in line and "registry.db" in line


def test_a_full_disk_under_a_database_with_a_pending_wal_still_reads(small_disk, capsys, monkeypatch):
    world = World.create(small_disk / "home", rows_per_day=20, days=3)
    ref = world.build().ref
    world.platform.registry.close()
    db = small_disk / "home" / "registry.db"
    leave_wal = (  # a writer killed before its checkpoint: the WAL holds a commit the database file does not
        "import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_autocheckpoint=0'); "
        "c.execute('CREATE TABLE IF NOT EXISTS scratch (x)'); c.commit(); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", leave_wal, str(db)], check=True)
    assert db.with_name("registry.db-wal").stat().st_size > 0
    _fill(small_disk)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(small_disk / "home")})
    verified = dsv("verify", ref)  # the WAL and its index are there: SQLite reads without making a file
    assert verified.code == 0 and verified.out.startswith(f"OK {ref}"), verified.err
    moved = dsv("alias", "set", "fraud_training_set:v6@full", ref.split("@", 1)[1])
    assert moved.code == 18, moved.err
    [line] = moved.err.strip().splitlines()
    assert line.startswith("dsv: error: ") and "the disk is full" in line
