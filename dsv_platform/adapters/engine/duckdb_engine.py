"""A DuckDB database for one build: on disk under the data home, with a memory limit and a spill folder.

Inputs stream in as Arrow record batches (a pinned Iceberg scan, file by file), so no input
is whole in memory; DuckDB keeps its tables on disk and spills joins, sorts and window
functions past ``memory_limit``. The folder is removed when the build ends, whatever happened; the DuckDB
instance it was attached to serves the process's next step when nothing of this one is left in it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from dsv_platform.core.errors import EnvironmentSetupError

if TYPE_CHECKING:
    import duckdb

    Connection = duckdb.DuckDBPyConnection

LOAD_ROWS = 1 << 16
OWNER = "owner.pid"
DEFAULT_MEMORY = 1 << 30  # 1 GiB: DuckDB's buffer pool; a build's own batches come on top (docs/scale.md)
ROW_GROUP_ROWS = 122_880
"""DuckDB's rows per row group, the most the engine's tables use."""
ROW_BYTES = 1 << 10
"""The row width (bytes) whose row groups :func:`row_group_rows` keeps within a quarter of the budget."""
CATALOG = "build"
"""The engine's database (its file, attached with the row group size), every connection's default."""


class EngineMemoryError(EnvironmentSetupError):
    """DuckDB could not keep one step within ``DSV_BUILD_MEMORY``, even spilling: the setting is too low for these rows."""


@dataclass(frozen=True)
class EngineLimits:
    """How much memory DuckDB may hold (bytes), how many threads it runs, and where it spills (None: the system temp folder)."""

    memory: int = DEFAULT_MEMORY
    threads: int | None = None
    spill_root: Path | None = None


class EngineSettings(Protocol):
    """What the engine's limits come from: the platform's settings (``DSV_BUILD_ENGINE``, ``DSV_BUILD_MEMORY``, the home's spill folder)."""

    @property
    def build_engine(self) -> str: ...
    @property
    def build_memory(self) -> int: ...
    @property
    def spill_dir(self) -> Path: ...


def limits_of(settings: EngineSettings) -> EngineLimits | None:
    """The engine's limits from ``DSV_BUILD_MEMORY`` (spilling under ``home/spill``); None under ``DSV_BUILD_ENGINE=arrow``."""
    if settings.build_engine == "arrow":
        return None
    return EngineLimits(memory=settings.build_memory, spill_root=settings.spill_dir)


def row_group_rows(limits: EngineLimits) -> int:
    """Rows per row group of the engine's tables: a power of two from 2,048 to DuckDB's 122,880.

    Writing a table, each DuckDB thread holds a whole row group and analyses it for compression, outside the memory
    limit: rows of 1.6 kB in 122,880-row groups took 810 MiB under a 192 MiB limit on two threads (16,384-row groups:
    400 MiB). The row groups of all threads, rows up to :data:`ROW_BYTES` wide, stay within a quarter of the budget;
    the default budget keeps DuckDB's size on one or two threads (smaller groups load narrow rows more slowly).
    """
    threads = limits.threads or os.cpu_count() or 1
    fit = max(limits.memory // (4 * threads * ROW_BYTES), 1)
    return max(2048, min(ROW_GROUP_ROWS, 1 << (fit.bit_length() - 1)))


@dataclass
class _Database:
    """A DuckDB database instance for engines of one memory limit and thread count, reused while it never spilled."""

    root: duckdb.DuckDBPyConnection
    key: tuple[int, int]


_idle: list[_Database] = []
_idle_lock = threading.Lock()
_idle_pid = os.getpid()
_inherited: list[_Database] = []  # a forked child's copies of its parent's databases: never used, never closed
IDLE_DATABASES = 2
"""Unused engine databases a process keeps: DuckDB takes about 30 ms to make one (its catalog of functions), a small step's work."""


def _take(limits: EngineLimits, threads: int, spill: Path) -> _Database:
    """An idle database of these limits moved to ``spill``, else a new one."""
    import duckdb

    global _idle_pid
    key = (limits.memory, threads)
    with _idle_lock:
        if _idle_pid != os.getpid():
            _inherited.extend(_idle)
            _idle.clear()
            _idle_pid = os.getpid()
        found = next((d for d in _idle if d.key == key), None)
        if found is not None:
            _idle.remove(found)
    if found is not None:
        try:
            found.root.execute(f"SET temp_directory = '{_literal(spill)}'")
            return found
        except duckdb.Error:  # it spilled after all: DuckDB keeps a used spill folder
            found.root.close()
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": _memory_limit(limits),
        "temp_directory": str(spill),
        "threads": threads,
        "preserve_insertion_order": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    root = duckdb.connect(config=config)
    root.execute("PRAGMA disable_checkpoint_on_shutdown")  # a step's database is deleted after: writing it out first took 30 ms
    return _Database(root, key)


def _give_back(database: _Database, limits: EngineLimits, spill: Path, *, reusable: bool) -> None:
    """Keep ``database`` for the next engine if its step ended well, detached, without spilling; else close it."""
    import duckdb

    if reusable and not spill.exists():  # DuckDB makes the spill folder when it first spills
        try:
            database.root.execute(f"DETACH {CATALOG}")
            database.root.execute(f"SET memory_limit = '{_memory_limit(limits)}'")  # shrink_pool lowers it
        except duckdb.Error:  # not reusable as it is
            database.root.close()
            return
        with _idle_lock:
            kept = _idle_pid == os.getpid()
            if kept:
                _idle.append(database)
            evicted = _idle[: max(len(_idle) - IDLE_DATABASES, 0)]  # the least recently used go
            del _idle[: len(evicted)]
        for old in evicted:
            old.root.close()
        if kept:
            return
    database.root.close()


@atexit.register
def _close_idle() -> None:
    with _idle_lock:
        while _idle and _idle_pid == os.getpid():
            _idle.pop().root.close()


def _memory_limit(limits: EngineLimits) -> str:
    """DuckDB's ``memory_limit`` for ``limits``: the budget, at least 64 MiB."""
    return f"{max(limits.memory >> 20, 64)}MiB"


def _literal(path: Path) -> str:
    return str(path).replace("'", "''")


@contextmanager
def engine(limits: EngineLimits) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh on-disk DuckDB database in its own folder under ``limits.spill_root``, removed afterwards.

    The folder holds the step's database file and DuckDB's spill files. The DuckDB instance it is attached to may
    be one an earlier step of the process used (its database detached and deleted, nothing spilled): the step sees
    only its own database.
    """
    try:
        import duckdb
    except ImportError as exc:  # a core dependency: only a broken environment lacks it
        raise EnvironmentSetupError(f"the build engine needs DuckDB: {exc}") from None
    if limits.spill_root is not None:
        limits.spill_root.mkdir(parents=True, exist_ok=True)
        sweep_stale(limits.spill_root)
    folder = Path(tempfile.mkdtemp(prefix="build-", dir=limits.spill_root))
    (folder / OWNER).write_text(str(os.getpid()))
    spill = folder / "spill"
    database = _take(limits, limits.threads or os.cpu_count() or 1, spill)
    con = database.root.cursor()
    ended = False
    try:
        con.execute(f"ATTACH '{_literal(folder / 'build.duckdb')}' AS {CATALOG} (ROW_GROUP_SIZE {row_group_rows(limits)})")
        con.execute(f"USE {CATALOG}")
        con.execute("SET TimeZone = 'UTC'")
        yield con
        ended = True
    except duckdb.OutOfMemoryException as exc:  # not every operator spills (a sort of rows of several kB): say which setting
        raise EngineMemoryError(
            f"the build engine needed more than its memory budget DSV_BUILD_MEMORY={limits.memory >> 20}MiB for one step "
            f"({str(exc).splitlines()[0]}); raise DSV_BUILD_MEMORY (docs/scale.md)"
        ) from exc
    finally:
        con.close()
        _give_back(database, limits, spill, reusable=ended)
        shutil.rmtree(folder, ignore_errors=True)


def engine_cursor(con: Connection) -> Connection:
    """A cursor of an engine connection (a connection of its own, for another thread) on the engine's database, like ``con``."""
    own = con.cursor()
    own.execute(f"USE {CATALOG}")
    return own


def sweep_stale(root: Path) -> list[Path]:
    """Remove the build folders under ``root`` whose process is gone (a killed build's rows must not outlive it)."""
    removed = []
    for folder in sorted(root.glob("build-*")) if root.is_dir() else []:
        try:
            pid = int((folder / OWNER).read_text())
        except (OSError, ValueError):
            pid = None  # no owner recorded: a folder from before owners were written, or half made
        if pid is not None and _alive(pid):
            continue
        try:
            shutil.rmtree(folder)
        except OSError as exc:  # fail closed: the privacy deletion relies on this
            raise EnvironmentSetupError(f"cannot remove the stale build folder {folder}: {exc}") from exc
        removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def load(con: duckdb.DuckDBPyConnection, name: str, batches: pa.RecordBatchReader, *, rows: int = LOAD_ROWS) -> None:
    """Create table ``name`` from a stream of record batches, inserted ``rows`` at a time (never whole in memory).

    One slice is in flight at a time: DuckDB's own scan of a Python stream reads many batches ahead.
    """
    empty = pa.Table.from_batches([], schema=batches.schema)
    con.register("__incoming", empty)
    try:
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM __incoming')
    finally:
        con.unregister("__incoming")
    for batch in batches:
        for start in range(0, batch.num_rows, rows):
            con.register("__incoming", pa.Table.from_batches([batch.slice(start, rows)]))
            try:
                con.execute(f'INSERT INTO "{name}" SELECT * FROM __incoming')
            finally:
                con.unregister("__incoming")


def load_parquet(con: duckdb.DuckDBPyConnection, name: str, files: Sequence[str], schema: pa.Schema, *, where: str | None = None) -> None:
    """Create table ``name`` from Parquet ``files`` (columns of ``schema``, which they hold by name), read by the engine itself.

    The engine reads the files in parallel, nothing passes through Python; no file: an empty table of ``schema``.
    """
    if not files:
        load(con, name, pa.RecordBatchReader.from_batches(schema, iter(())))
        return
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    columns = ", ".join('"' + c.replace('"', '""') + '"' for c in schema.names)
    con.execute(f'CREATE TABLE "{name}" AS SELECT {columns} FROM read_parquet([{listed}]){f" WHERE {where}" if where else ""}')


def load_table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Create table ``name`` from a small in-memory table (a list of values, the excluded batches)."""
    load(con, name, pa.RecordBatchReader.from_batches(table.schema, table.to_batches()))


__all__ = ["DEFAULT_MEMORY", "EngineLimits", "EngineMemoryError", "engine", "limits_of", "load", "load_parquet", "load_table", "sweep_stale"]
