"""The embedded instance's SQLite event log, with one database engine per shard for the life of the process.

Dagster's ``SqliteEventLogStorage`` creates a SQLAlchemy engine for every event it stores and disposes of it after,
so each event pays the engine's set-up and compiles its statements anew: a small in-process build's run stores
about 65 events (profiled over eight small builds: storing events a fifth of the time, making engines half of that). :func:`keep_engines`
makes an instance's SQLite event log keep each shard's engine. There is still no pool: every use opens and closes its
own SQLite connection, in its own transaction, under Dagster's lock, as before; what is kept is the engine's dialect
and its compiled-statement cache. The webserver and the daemon open the same storage with Dagster's own class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool


class EngineKeepingSqliteEventLog(SqliteEventLogStorage):
    """Dagster's SQLite event log whose engines, one per shard (a run's database, the index), outlive a connection."""

    @property
    def _engines(self) -> dict[str, Engine]:
        return cast(dict[str, Engine], vars(self).setdefault("_dsv_engines", {}))

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:  # Dagster's, keeping the engine instead of disposing of it
        with self._db_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = create_engine(self.conn_string_for_shard(shard), poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
                self._engines[shard] = engine
            with engine.connect() as conn, conn.begin():
                yield conn

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        super().dispose()


def keep_engines(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """``instance``, its event log made an :class:`EngineKeepingSqliteEventLog` when it is Dagster's SQLite one (any other is left as it is)."""
    storage = instance.event_log_storage
    if type(storage) is SqliteEventLogStorage:
        storage.__class__ = EngineKeepingSqliteEventLog  # the same object and state: only how it connects changes
    return instance
