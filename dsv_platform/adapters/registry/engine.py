"""SQLAlchemy engines for the registry: SQLite (embedded default) and PostgreSQL.

SQLite writers take the write lock up front (``BEGIN IMMEDIATE``) instead of failing
half-way; on PostgreSQL correctness comes from unique constraints and conditional updates.

Details: docs/storage.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, ExceptionContext, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from dsv_platform.core.errors import EnvironmentSetupError, ServiceUnreachableError, mask_url

BUSY_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 5


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
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("dsv_write") else "BEGIN")

    return engine


def _postgres_engine(parsed: URL, url: str) -> Engine:
    """PostgreSQL with a bounded connect timeout; a server that does not answer is one ServiceUnreachableError naming the URL."""
    connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_TIMEOUT_S}
    engine = create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)

    @event.listens_for(engine, "handle_error")
    def _unreachable(ctx: ExceptionContext) -> None:
        if ctx.connection is None and isinstance(ctx.sqlalchemy_exception, OperationalError):
            detail = " ".join(str(ctx.original_exception).split())[:300]
            raise ServiceUnreachableError(f"registry {mask_url(url)}: cannot connect ({detail})") from ctx.original_exception

    return engine
