"""The landing index lives in the registry database (issue 26 item 4), and a home's SQLite landing index is imported once.

Before: the index was ``landing_index.db`` under ``DSV_HOME``, a SQLite file on the shared volume. Now its rows are in the
registry (migration 22) on SQLite and PostgreSQL; an existing home's file is imported on first open (idempotent, kill-safe)
and set aside as ``landing_index.db.imported``, never deleted.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select

from dsv_platform.adapters.objects.landing import INDEX_FILE, LandingStatus, LandingZone
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import landing_import
from dsv_platform.adapters.registry import landing_index as li
from dsv_platform.adapters.registry.landing_index import LandingIndex
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]  # the parametrized SQLite / PostgreSQL registry URL

DOMAIN = FraudDomain(rows_per_day=20)
DAY = DOMAIN.start + dt.timedelta(days=1)

# The SQLite landing index as releases before migration 22 wrote it (frozen here: the adapter no longer has it).
_OLD_SCHEMA = """
CREATE TABLE landed_batch (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, day TEXT NOT NULL, batch_id TEXT NOT NULL, digest TEXT NOT NULL,
    size INTEGER NOT NULL, rows INTEGER NOT NULL, recorded_at TEXT NOT NULL, landed_at TEXT NOT NULL, status TEXT NOT NULL, reason TEXT,
    UNIQUE (source, day, batch_id, digest));
CREATE TABLE redacted_batch (digest TEXT PRIMARY KEY, generation INTEGER NOT NULL, reason TEXT NOT NULL, redacted_at TEXT NOT NULL);
"""
AT = dt.datetime(2026, 1, 5, 3, tzinfo=dt.UTC)


def _digest(n: int) -> str:
    return f"{n:064x}"


OLD_ROWS = [  # (source, day, batch id, digest, rows, recorded at, status, reason, writer)
    ("transactions", "2026-01-02", "daily", _digest(1), 20, AT, "landed", None, None),
    ("transactions", "2026-01-02", "daily", _digest(2), 21, AT - dt.timedelta(hours=1), "revised", None, "alice"),
    ("transactions", "2026-01-03", "bad", _digest(3), 0, AT, "quarantined", "not CSV", "alice"),
    ("chargebacks", "0001-01-01", "all", _digest(4), 7, AT, "landed", None, "bob"),
]


def write_old_index(path: Path, *, writer_column: bool = True) -> None:
    """A home's landing index from before (with the ``writer`` column identities added, or from before them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_OLD_SCHEMA)
        if writer_column:
            conn.execute("ALTER TABLE landed_batch ADD COLUMN writer TEXT")
        for source, day, batch_id, digest, rows, recorded, status, reason, writer in OLD_ROWS:
            values = [source, day, batch_id, digest, 100 + rows, rows, recorded.isoformat(), (AT + dt.timedelta(minutes=1)).isoformat(), status, reason]
            columns = "source, day, batch_id, digest, size, rows, recorded_at, landed_at, status, reason"
            if writer_column:
                values, columns = [*values, writer], columns + ", writer"
            conn.execute(f"INSERT INTO landed_batch ({columns}) VALUES ({', '.join('?' * len(values))})", values)
        conn.execute("INSERT INTO redacted_batch VALUES (?, 3, 'subject s-1', ?)", (_digest(2), AT.isoformat()))
    conn.close()


def open_zone(url: str, home: Path) -> LandingZone:
    index = LandingIndex(Registry.from_url(url).engine, legacy_index=home / INDEX_FILE)
    return LandingZone(LocalObjectStore(home / "objects", fsync=False), index)


def test_the_landing_index_is_in_the_registry_not_a_file_under_the_home(backend_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    zone = open_zone(backend_url, home)
    record = zone.land(events.daily_batch(DOMAIN, "transactions", DAY), TRANSACTIONS)
    assert not (home / INDEX_FILE).exists(), "no SQLite file under the home"
    assert {"landed_batches", "redacted_batches", "landing_imports"} <= set(inspect(zone.index.engine).get_table_names())
    other = open_zone(backend_url, tmp_path / "another-home")  # another process, another home, the same registry: the same index
    assert other.records() == [record]
    assert other.land(events.daily_batch(DOMAIN, "transactions", DAY), TRANSACTIONS).status is LandingStatus.UNCHANGED
    assert other.mark_redacted(record.digest, 1, "test") and not zone.mark_redacted(record.digest, 2, "again")
    assert zone.records()[0].redacted_generation == 1 and zone.loadable("transactions", DAY) == []


@pytest.mark.parametrize("writer_column", [True, False], ids=["with-writers", "before-identities"])
def test_an_existing_sqlite_landing_index_is_imported_once_and_set_aside(backend_url: str, tmp_path: Path, writer_column: bool) -> None:
    home = tmp_path / "home"
    write_old_index(home / INDEX_FILE, writer_column=writer_column)
    zone = open_zone(backend_url, home)
    assert zone.index.imported == 4
    got = [(r.source, r.day.isoformat(), r.batch_id, r.digest, r.rows, r.recorded_at, r.status.value, r.reason, r.writer) for r in zone.records()]
    assert got == [row if writer_column else (*row[:-1], None) for row in OLD_ROWS]
    assert [r.seq for r in zone.records()] == sorted(r.seq for r in zone.records())  # the file's landing order
    assert [r.redacted_generation for r in zone.records()] == [None, 3, None, None]
    assert zone.redaction(_digest(2)) == {"generation": 3, "reason": "subject s-1", "redacted_at": AT.isoformat()}
    assert [r.digest for r in zone.loadable("transactions", dt.date(2026, 1, 2))] == [_digest(1)]  # revised one redacted
    assert not (home / INDEX_FILE).exists() and (home / f"{INDEX_FILE}.imported").is_file(), "set aside, never deleted"
    with sqlite3.connect(home / f"{INDEX_FILE}.imported") as kept:
        assert kept.execute("SELECT COUNT(*) FROM landed_batch").fetchone()[0] == 4
    kept.close()

    again = open_zone(backend_url, home)
    assert again.index.imported is None and len(again.records()) == 4
    with again.index.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(li.landing_imports)).scalar() == 1


def test_an_older_process_writing_the_file_again_is_imported_on_the_next_open(backend_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_old_index(home / INDEX_FILE)
    open_zone(backend_url, home)
    write_old_index(home / INDEX_FILE)  # a process of the old release, still running, landed into a new file
    with sqlite3.connect(home / INDEX_FILE) as conn:
        conn.execute(
            "INSERT INTO landed_batch (source, day, batch_id, digest, size, rows, recorded_at, landed_at, status, reason, writer) "
            "VALUES ('transactions', '2026-01-04', 'late', ?, 1, 1, ?, ?, 'landed', NULL, NULL)",
            (_digest(9), AT.isoformat(), AT.isoformat()),
        )
    conn.close()
    zone = open_zone(backend_url, home)
    assert zone.index.imported == 1 and [r.batch_id for r in zone.records()][-1] == "late" and len(zone.records()) == 5
    assert (home / f"{INDEX_FILE}.imported").is_file() and (home / f"{INDEX_FILE}.imported.2").is_file()


def test_an_import_interrupted_after_its_commit_only_sets_the_file_aside_next_time(
    backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    write_old_index(home / INDEX_FILE)

    def killed(path: Path, inode: int) -> None:
        raise KeyboardInterrupt("killed between the commit and the rename")

    with monkeypatch.context() as m:
        m.setattr(landing_import, "set_aside", killed)
        with pytest.raises(KeyboardInterrupt):
            open_zone(backend_url, home)
    assert (home / INDEX_FILE).exists()
    zone = open_zone(backend_url, home)
    assert zone.index.imported == 0 and len(zone.records()) == 4 and (home / f"{INDEX_FILE}.imported").exists()


_KILLED_IMPORT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from sqlalchemy import insert as real_insert
    from dsv_platform.adapters.registry import landing_import
    from dsv_platform.adapters.registry.registry import Registry
    calls = []
    def insert(table):  # the third batch row: SIGKILL, mid-transaction
        calls.append(table)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_insert(table)
    landing_import.insert = insert
    landing_import.import_sqlite_index(Registry.from_url(sys.argv[1]).engine, Path(sys.argv[2]))
    """
)


def test_an_import_killed_before_its_commit_imports_nothing_and_runs_again(backend_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_old_index(home / INDEX_FILE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", _KILLED_IMPORT, backend_url, str(home / INDEX_FILE)], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    with Registry.from_url(backend_url).engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(li.landed_batches)).scalar() == 0, "nothing half-imported"
    assert (home / INDEX_FILE).exists()
    zone = open_zone(backend_url, home)
    assert zone.index.imported == 4 and len(zone.records()) == 4
