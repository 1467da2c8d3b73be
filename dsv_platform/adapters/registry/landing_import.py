"""A home's SQLite landing index (``landing_index.db``, before migration 22) imported into the registry, once.

On first open, the file's batch rows and redaction marks the registry lacks are copied in landing order, in one
transaction that records the import; then the file is renamed ``landing_index.db.imported``, never deleted.
Killed before the commit, the next open runs it again; after it, the next open finds every row (the unique
key) and only renames. Concurrent opens are serialized; a file an older process writes again is imported next time.

Details: docs/storage.md
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine

from dsv_platform.adapters.registry import landing_index as li

IMPORTED_SUFFIX = ".imported"
_SIDECARS = ("-wal", "-shm")


def import_sqlite_index(engine: Engine, path: Path) -> int | None:
    """Import the SQLite landing index at ``path`` into the registry and set the file aside; the batch rows added (None: no file)."""
    try:
        inode = path.stat().st_ino
    except FileNotFoundError:
        return None
    batches, marks = _read(path)
    if batches is None:  # set aside by another process meanwhile
        return None
    added = li.retrying(engine, lambda conn: _import(conn, path, batches, marks), lock="import")
    set_aside(path, inode)
    return added


def _read(path: Path) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The file's batch rows (by seq) and redaction marks; (None, []) when the file is gone. Its WAL is checkpointed into it."""
    try:  # mode=rw: never create a file that is not there
        conn = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode=rw", uri=True, timeout=30, isolation_level=None)
    except sqlite3.OperationalError:
        return None, []
    conn.row_factory = sqlite3.Row
    with closing(conn):
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        batches = [dict(r) for r in conn.execute("SELECT * FROM landed_batch ORDER BY seq")] if "landed_batch" in tables else []
        marks = [dict(r) for r in conn.execute("SELECT * FROM redacted_batch ORDER BY digest")] if "redacted_batch" in tables else []
        with suppress(sqlite3.OperationalError):  # another reader holds it: the rename below carries the WAL along
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return batches, marks


def _values(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": row["source"],
        "day": dt.date.fromisoformat(row["day"]),
        "batch_id": row["batch_id"],
        "digest": row["digest"],
        "size": int(row["size"]),
        "rows": int(row["rows"]),
        "recorded_at": dt.datetime.fromisoformat(row["recorded_at"]),
        "landed_at": dt.datetime.fromisoformat(row["landed_at"]),
        "status": row["status"],
        "reason": row["reason"],
        "writer": row.get("writer"),  # None in an index from before identities
    }


def _import(conn: Connection, path: Path, batches: list[dict[str, Any]], marks: list[dict[str, Any]]) -> int:
    t = li.landed_batches
    have = {(r.source, r.day, r.batch_id, r.digest) for r in conn.execute(select(t.c.source, t.c.day, t.c.batch_id, t.c.digest))}
    new = []
    for values in map(_values, batches):
        key = (values["source"], values["day"], values["batch_id"], values["digest"])
        if key not in have:
            have.add(key)
            new.append(values)
    for values in new:  # one at a time: seq follows the file's landing order on every backend
        conn.execute(insert(t).values(**values))
    marked = li.redactions(conn)
    fresh = [m for m in marks if m["digest"] not in marked]
    for mark in fresh:
        conn.execute(
            insert(li.redacted_batches).values(
                digest=mark["digest"], generation=int(mark["generation"]), reason=mark["reason"], redacted_at=dt.datetime.fromisoformat(mark["redacted_at"])
            )
        )
    now = dt.datetime.now(dt.UTC)
    conn.execute(insert(li.landing_imports).values(path=str(path), batches=len(new), redactions=len(fresh), imported_at=now))
    return len(new)


def set_aside(path: Path, inode: int) -> Path | None:
    """Rename the imported file (the one with ``inode``) to ``<name>.imported`` (``.imported.2``, ... if taken), its WAL files along; never delete."""
    try:
        if path.stat().st_ino != inode:  # not the file that was read: imported on a later open
            return None
    except FileNotFoundError:
        return None
    target = path.with_name(path.name + IMPORTED_SUFFIX)
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{IMPORTED_SUFFIX}.{n}")
    try:
        os.rename(path, target)
    except FileNotFoundError:  # another process set it aside first
        return None
    for suffix in _SIDECARS:
        with suppress(FileNotFoundError):
            os.rename(path.with_name(path.name + suffix), target.with_name(target.name + suffix))
    return target


__all__ = ["IMPORTED_SUFFIX", "import_sqlite_index", "set_aside"]
