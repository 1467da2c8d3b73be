"""SQLAlchemy engines for the registry: SQLite (embedded default) and PostgreSQL.

SQLite writers take the write lock up front (``BEGIN IMMEDIATE``) instead of failing
half-way; on PostgreSQL correctness comes from unique constraints and conditional updates.

Details: docs/storage.md
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from dsv_platform.core.errors import DiskFullError, EnvironmentSetupError, ServiceUnreachableError, is_disk_full, mask_url

BUSY_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 5
FULL_BELOW_BYTES = 1 << 20  # SQLite needs room for its WAL index (32 KiB) and WAL pages even to read


def _free_bytes(path: Path) -> int:
    try:
        free = os.statvfs(path.parent)
    except OSError:
        return FULL_BELOW_BYTES
    return free.f_bavail * free.f_frsize


def read_only_when_full(path: Path) -> bool:
    """The SQLite database at ``path`` is on a full file system and its WAL holds nothing: open it read-only (immutable).

    On a full disk a WAL database cannot even be read (its ``-shm`` cannot be made); with an empty WAL the
    database file alone is the whole state, so read-only commands still work. Writes then fail (disk full).
    """
    try:
        free = os.statvfs(path.parent)
        wal = path.with_name(path.name + "-wal")
        return free.f_bavail * free.f_frsize < FULL_BELOW_BYTES and path.is_file() and (not wal.exists() or wal.stat().st_size == 0)
    except OSError:
        return False


def disk_full_message(what: str, path: Path) -> str:
    """One line: ``what`` cannot be written, the disk under ``path`` is full (bytes free named)."""
    try:
        free = os.statvfs(path.parent)
        left = f"{free.f_bavail * free.f_frsize:,} bytes free"
    except OSError:
        left = "no space left"
    return f"{what}: the disk is full ({left} under {path.parent}); free space and retry (read-only commands still work)"


def read_only_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only and immutable (no lock files, no WAL index)."""
    return f"file:{path.resolve().as_posix()}?mode=ro&immutable=1"


class _ReadOnlyWhenFull(sqlite3.Connection):
    """A SQLite database opened read-only on a full disk: a write is a DiskFullError naming it."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as exc:
            if "readonly database" not in str(exc):
                raise
            path = Path(super().execute("PRAGMA database_list").fetchone()[2])
            raise DiskFullError(disk_full_message(f"{path.name} ({path})", path)) from exc


def connect_sqlite(path: Path) -> sqlite3.Connection:
    """The SQLite database at ``path`` in WAL mode, rows as ``sqlite3.Row``; read-only and immutable on a full disk
    (:func:`read_only_when_full`), where a write is a DiskFullError naming it."""
    if read_only_when_full(path):
        conn: sqlite3.Connection = sqlite3.connect(read_only_uri(path), timeout=30, isolation_level=None, uri=True, factory=_ReadOnlyWhenFull)
    else:
        conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
    conn.row_factory = sqlite3.Row
    return conn


def create_registry_engine(url: str) -> Engine:
    """An engine for a ``sqlite:///path`` or ``postgresql+psycopg2://`` registry URL."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        expected = "sqlite:///PATH or postgresql+psycopg2://USER@HOST/DB"
        raise EnvironmentSetupError(f"DSV_REGISTRY_URL {mask_url(url)!r}: not a database URL; expected {expected}") from exc
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return _postgres_engine(parsed, url)
    if backend != "sqlite":
        raise EnvironmentSetupError(f"DSV_REGISTRY_URL {mask_url(url)!r}: only sqlite:/// and postgresql+psycopg2:// are supported")
    database = parsed.database
    read_only = False
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        read_only = read_only_when_full(Path(database))
    if read_only:  # a full disk: read-only commands still read (docs/reliability.md)
        engine = create_engine(f"sqlite:///{read_only_uri(Path(str(database)))}&uri=true", connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
    else:
        engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if not read_only:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "handle_error")
    def _full(ctx: ExceptionContext) -> None:
        text = str(ctx.original_exception)
        full = "disk I/O error" in text and _free_bytes(Path(str(database))) < FULL_BELOW_BYTES  # a WAL index that cannot grow
        if full or is_disk_full(ctx.original_exception) or (read_only and "readonly database" in text):
            raise DiskFullError(disk_full_message(f"registry {database}", Path(str(database)))) from ctx.original_exception

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("dsv_write") else "BEGIN")

    return engine


def create_postgres_engine(url: str, *, setting: str, what: str) -> Engine:
    """An engine for a ``postgresql+psycopg2://`` URL that ``setting`` names (the key store's own database); anything else an
    EnvironmentSetupError naming ``setting`` and the masked URL."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise EnvironmentSetupError(f"{setting} {mask_url(url)!r}: not a database URL; expected postgresql+psycopg2://USER@HOST/DB") from exc
    if parsed.get_backend_name() != "postgresql":
        raise EnvironmentSetupError(f"{setting} {mask_url(url)!r}: only postgresql+psycopg2:// is supported")
    return _postgres_engine(parsed, url, what)


def _postgres_engine(parsed: URL, url: str, what: str = "registry") -> Engine:
    """PostgreSQL with a bounded connect timeout; a server that does not answer is one ServiceUnreachableError naming ``what`` and the URL."""
    connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_TIMEOUT_S}
    engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)

    @event.listens_for(engine, "handle_error")
    def _unreachable(ctx: ExceptionContext) -> None:
        if ctx.connection is None and isinstance(ctx.sqlalchemy_exception, OperationalError):
            detail = " ".join(str(ctx.original_exception).split())[:300]
            raise ServiceUnreachableError(f"{what} {mask_url(url)}: cannot connect ({detail})") from ctx.original_exception

    return engine
