"""The embedded instance's SQLite event log, with its shards' engines and connections kept for the life of the process.

Dagster's ``SqliteEventLogStorage`` creates a SQLAlchemy engine for every event it stores and disposes of it after,
so each event pays the engine's set-up, compiles its statements anew and opens and closes its SQLite file; closing
the last connection of a WAL database checkpoints it and deletes the WAL, with fsyncs (profiled on the 4-day demo:
storing events a fifth of its time, commits and closes 8 %, creating each run's shard 3 %: Alembic reloads its
revision scripts to stamp it). :func:`keep_engines` makes an instance's SQLite event log keep an engine per shard
with one pooled connection, the last few shards used (a run's events come together), and create a new run's shard as
a copy of the one Dagster's own creation made once in the process. Every use is still its own transaction under
Dagster's lock, synced as before; the webserver and the daemon open the same storage with Dagster's own class.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import dagster as dg
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, QueuePool

KEPT_SHARDS = 8
"""Shards whose engine and connection stay open (the index and the latest runs'); the least recently used one closes."""


class EngineKeepingSqliteEventLog(SqliteEventLogStorage):
    """Dagster's SQLite event log whose engines, one per shard (a run's database, the index), outlive a connection."""

    @property
    def _engines(self) -> OrderedDict[str, Engine]:
        kept = vars(self).get("_dsv_engines")
        if kept is None or kept[0] != os.getpid():  # a forked child never uses its parent's SQLite connections
            kept = vars(self)["_dsv_engines"] = (os.getpid(), OrderedDict())
        return cast(OrderedDict[str, Engine], kept[1])

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:  # Dagster's, keeping the engine instead of disposing of it
        with self._db_lock:
            engines = self._engines
            engine = engines.get(shard)
            if engine is None:
                if shard not in self._initialized_dbs:
                    if not self._born(shard):
                        self._initdb_alone(self.conn_string_for_shard(shard))
                    self._initialized_dbs.add(shard)
                engine = engines[shard] = create_engine(
                    self.conn_string_for_shard(shard),
                    poolclass=QueuePool,
                    pool_size=1,
                    max_overflow=4,
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},  # uses are serialized by the lock
                )
                while len(engines) > KEPT_SHARDS:
                    engines.popitem(last=False)[1].dispose()
            engines.move_to_end(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _initdb_alone(self, conn_string: str) -> None:
        """Dagster's creation of a shard, on an engine of its own as Dagster does (it checks out more than one connection)."""
        engine = create_engine(conn_string, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        try:
            self._initdb(engine)
        finally:
            engine.dispose()

    def _born(self, shard: str) -> bool:
        """Create a new run's shard as a copy of the one Dagster's creation made once in this process; False if it exists."""
        path = self.path_for_shard(shard)
        if os.path.exists(path):
            return False
        template = vars(self).get("_dsv_template")
        if template is None:
            with tempfile.TemporaryDirectory(prefix="dsv-shard-") as folder:
                self._initdb_alone(f"sqlite:///{os.path.join(folder, 'new.db')}")
                complete = os.listdir(folder) == ["new.db"]  # no WAL left beside it
                with open(os.path.join(folder, "new.db"), "rb") as f:
                    template = vars(self)["_dsv_template"] = f.read() if complete else b""  # b"": not tried again
        if not template:
            return False
        staged = f"{path}.{os.getpid()}.new"
        try:
            with open(staged, "xb") as f:
                f.write(template)
            os.link(staged, path)  # never over a shard another process made meanwhile
        except OSError:  # the shard exists now, or the folder cannot link: Dagster's own creation then
            return False
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)
        return True

    def _dispose_engines(self) -> None:
        engines = self._engines
        while engines:
            engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self._dispose_engines()  # Dagster's wipe deletes the run shards' files
        super().wipe()

    def dispose(self) -> None:
        self._dispose_engines()
        super().dispose()


def keep_engines(instance: dg.DagsterInstance) -> dg.DagsterInstance:
    """``instance``, its event log made an :class:`EngineKeepingSqliteEventLog` when it is Dagster's SQLite one (any other is left as it is)."""
    storage = instance.event_log_storage
    if type(storage) is SqliteEventLogStorage:
        storage.__class__ = EngineKeepingSqliteEventLog  # the same object and state: only how it connects changes
    return instance
