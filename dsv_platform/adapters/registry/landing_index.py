"""The landing index in the registry database (migration 22): one row per landed batch and partition day, and redaction marks.

It was a SQLite file under ``DSV_HOME``, whose locking is unreliable on a shared network volume; now it is in the
registry's transactions (a home's old file is imported once: :mod:`landing_import`). Indexing is serialized per
(source, day, batch id): SQLite's write lock, a PostgreSQL advisory lock; the unique key (source, day, batch id,
digest) makes two writers of the same bytes converge to one row.

Details: docs/storage.md
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import BigInteger, Column, Date, Index, Integer, String, Table, Text, UniqueConstraint, func, insert, select
from sqlalchemy.engine import Connection, Engine, Row

from dsv_platform.adapters.registry.schema import HASH, NAME, UtcDateTime, metadata
from dsv_platform.adapters.registry.transactions import retrying_writes

T = TypeVar("T")
_LOCK_CLASS = 0x64736C69  # "dsli": the advisory lock space of landing-index writes (PostgreSQL)

landed_batches = Table(  # migration 22; append-only
    "landed_batches",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("source", NAME, nullable=False),
    Column("day", Date, nullable=False),
    Column("batch_id", Text, nullable=False),
    Column("digest", HASH, nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("landed_at", UtcDateTime, nullable=False),
    Column("status", String(20), nullable=False),
    Column("reason", Text),
    Column("writer", NAME),
    UniqueConstraint("source", "day", "batch_id", "digest", name="uq_landed_batches"),
    Index("ix_landed_batches_digest", "digest"),
    sqlite_autoincrement=True,  # seq never reused: landing order
)

redacted_batches = Table(  # migration 22; append-only: a redaction is for good
    "redacted_batches",
    metadata,
    Column("digest", HASH, primary_key=True),
    Column("generation", Integer, nullable=False),
    Column("reason", Text, nullable=False),
    Column("redacted_at", UtcDateTime, nullable=False),
)

landing_imports = Table(  # migration 22: each import of a home's SQLite landing index (landing_import.py)
    "landing_imports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("path", Text, nullable=False),
    Column("batches", Integer, nullable=False),
    Column("redactions", Integer, nullable=False),
    Column("imported_at", UtcDateTime, nullable=False),
)

LANDING_TABLES = (landed_batches, redacted_batches, landing_imports)
APPEND_ONLY = (landed_batches, redacted_batches)


@contextmanager
def write(engine: Engine, *, lock: str | None = None) -> Iterator[Connection]:
    """A write transaction on the registry's engine (SQLite: ``BEGIN IMMEDIATE``), holding the PostgreSQL advisory lock of ``lock``."""
    with engine.connect() as conn:
        conn.execution_options(dsv_write=True)
        with conn.begin():
            if lock is not None and conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_LOCK_CLASS, _lock_key(lock))))
            yield conn


def _lock_key(text: str) -> int:
    """A signed 32-bit key of ``text`` (PostgreSQL's two-key advisory locks take int4)."""
    value = zlib.crc32(text.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def retrying(engine: Engine, work: Callable[[Connection], T], *, lock: str | None = None) -> T:
    """``work`` in a write transaction; after losing a unique key to a concurrent writer, rolled back and run again (it then reads the winner)."""
    return retrying_writes(lambda: write(engine, lock=lock), work, what="landing index")


def batch_lock(source: str, day: dt.date, batch_id: str) -> str:
    return f"{source}\x00{day.isoformat()}\x00{batch_id}"


def find(conn: Connection, source: str, day: dt.date, batch_id: str, digest: str | None = None) -> list[Row[Any]]:
    """The index rows of a batch id under a day (of one digest when given), by seq."""
    t = landed_batches
    stmt = select(t).where(t.c.source == source, t.c.day == day, t.c.batch_id == batch_id)
    if digest is not None:
        stmt = stmt.where(t.c.digest == digest)
    return list(conn.execute(stmt.order_by(t.c.seq)))


def add(conn: Connection, values: Mapping[str, Any]) -> Row[Any]:
    """Insert one index row; the row as stored (its seq)."""
    key = conn.execute(insert(landed_batches).values(**values)).inserted_primary_key
    assert key is not None
    seq = key[0]
    return conn.execute(select(landed_batches).where(landed_batches.c.seq == seq)).one()


def rows(conn: Connection, source: str | None = None, day: dt.date | None = None) -> list[Row[Any]]:
    """Index rows (all, of one source, or of one source and day) in landing order (seq)."""
    t = landed_batches
    stmt = select(t)
    if source is not None:
        stmt = stmt.where(t.c.source == source)
    if day is not None:
        stmt = stmt.where(t.c.day == day)
    return list(conn.execute(stmt.order_by(t.c.seq)))


def redactions(conn: Connection) -> dict[str, int]:
    """``{digest: generation}`` of every redaction mark."""
    return {str(r.digest): int(r.generation) for r in conn.execute(select(redacted_batches.c.digest, redacted_batches.c.generation))}


def redaction(conn: Connection, digest: str) -> Row[Any] | None:
    return conn.execute(select(redacted_batches).where(redacted_batches.c.digest == digest)).first()


def mark_redacted(conn: Connection, digest: str, generation: int, reason: str, at: dt.datetime) -> bool:
    """Mark ``digest`` redacted; False if it was marked before (the first mark stays)."""
    if redaction(conn, digest) is not None:
        return False
    conn.execute(insert(redacted_batches).values(digest=digest, generation=generation, reason=reason, redacted_at=at))
    return True


Record = Mapping[str, Any]
"""One index row: seq, source, day, batch_id, digest, size, rows, recorded_at, landed_at, status, reason, writer."""


class LandingIndex:
    """The landing index of the registry at ``engine`` (migrated), for :class:`~dsv_platform.adapters.objects.landing.LandingZone`.

    ``legacy_index``: a home's SQLite landing index, imported when it is there (:mod:`landing_import`; :attr:`imported`).
    """

    def __init__(self, engine: Engine, *, legacy_index: Path | None = None) -> None:
        from dsv_platform.adapters.registry.landing_import import import_sqlite_index  # it imports this module

        self.engine = engine
        self.imported = import_sqlite_index(engine, legacy_index) if legacy_index is not None else None
        """Batch rows this open imported from ``legacy_index`` (None: no file there)."""

    def index(self, values: Mapping[str, Any], status: Callable[[bool], str]) -> tuple[bool, Record]:
        """Index a batch under a day, ``values`` without its status: (True, the new row), or (False, the row of these bytes there already).

        ``status(revised)`` names the new row's status, ``revised`` when other bytes of the batch id are indexed under the day.
        """

        def work(conn: Connection) -> tuple[bool, Record]:
            known = find(conn, values["source"], values["day"], values["batch_id"])
            same = [r for r in known if r.digest == values["digest"]]
            if same:
                return False, dict(same[0]._mapping)
            return True, dict(add(conn, {**values, "status": status(bool(known))})._mapping)

        return retrying(self.engine, work, lock=batch_lock(values["source"], values["day"], values["batch_id"]))

    def rows(self, source: str | None = None, day: dt.date | None = None) -> tuple[list[Record], dict[str, int]]:
        """Index rows (all, of one source, or of one source and day) in landing order, and ``{digest: generation}`` of the redaction marks."""
        with self.engine.connect() as conn, conn.begin():
            return [dict(r._mapping) for r in rows(conn, source, day)], redactions(conn)

    def mark_redacted(self, digest: str, generation: int, reason: str, at: dt.datetime) -> bool:
        return retrying(self.engine, lambda conn: mark_redacted(conn, digest, generation, reason, at), lock=f"redaction\x00{digest}")

    def redaction(self, digest: str) -> Record | None:
        with self.engine.connect() as conn, conn.begin():
            row = redaction(conn, digest)
        return None if row is None else dict(row._mapping)


__all__ = ["APPEND_ONLY", "LANDING_TABLES", "LandingIndex", "Record", "landed_batches", "landing_imports", "redacted_batches"]
