"""The registry's transaction plumbing: the clock, read and write transactions, and retry on a lost race.

Write transactions on SQLite start with ``BEGIN IMMEDIATE`` (see engine.py). On
PostgreSQL, a write that loses a unique constraint to a concurrent writer
(IntegrityError) or hits a deadlock/serialization failure is rolled back and
re-run from a fresh read, which then reconciles with the winner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from dsv_platform.core.errors import DsvError

T = TypeVar("T")
Clock = Callable[[], datetime]
ATTEMPTS = 20
_RETRYABLE_PGCODES = {"40001", "40P01"}  # serialization failure, deadlock detected


def utcnow() -> datetime:
    return datetime.now(UTC)


class RegistryTransactions:
    """An engine and a clock, with the transactions every registry operation runs in."""

    def __init__(self, engine: Engine, *, clock: Clock = utcnow) -> None:
        self.engine = engine
        self._clock = clock

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise DsvError(f"registry clock returned a naive datetime {now!r}")
        return now.astimezone(UTC)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(dsv_write=True)
            with conn.begin():
                yield conn

    def _retrying(self, work: Callable[[Connection], T], *, also: tuple[type[Exception], ...] = ()) -> T:
        """Run ``work`` in a write transaction; after losing to a concurrent writer, roll back and run it again."""
        return retrying_writes(self._write, work, also=also, what="registry")


def retrying_writes(
    write: Callable[[], AbstractContextManager[Connection]],
    work: Callable[[Connection], T],
    *,
    also: tuple[type[Exception], ...] = (),
    what: str = "registry",
) -> T:
    """``work`` in the write transaction ``write()`` opens; after losing a unique key or a serialization race to a concurrent
    writer (or one of ``also``), rolled back and run again (it then reads the winner), at most ``ATTEMPTS`` times."""
    last: Exception | None = None
    for _ in range(ATTEMPTS):
        try:
            with write() as conn:
                return work(conn)
        except IntegrityError as exc:
            last = exc
        except DBAPIError as exc:
            if getattr(exc.orig, "pgcode", None) not in _RETRYABLE_PGCODES:
                raise
            last = exc
        except also as exc:
            last = exc
    raise DsvError(f"{what} write kept conflicting with concurrent writers after {ATTEMPTS} attempts: {last}") from last
