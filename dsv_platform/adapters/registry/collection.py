"""GC deletion intents (migration 12): the objects a GC batch is deleting now, which no publication may name meanwhile.

GC claims each batch here in a write transaction that also checks the plan's state watermark; a publication
refuses, in its own transaction, to name a claimed object. The two transactions are serialized (SQLite: one
writer; PostgreSQL: one advisory lock): either the publication commits first and GC stops at the changed
watermark, or the claim does and the publisher waits for GC, re-puts what went and publishes. After
publishing, the publisher re-puts any part a batch that finished earlier deleted.

Details: docs/gc-and-privacy.md, "GC against a publisher".
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Table, delete, func, insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import retention
from dsv_platform.adapters.registry.schema import HASH, NAME, UtcDateTime, metadata
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core.errors import DsvError

gc_deletions = Table(  # rows live only while a GC batch deletes them
    "gc_deletions",
    metadata,
    Column("digest", HASH, primary_key=True),
    Column("actor", NAME, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
)

_PG_GC_LOCK_ID = 0x64737667  # "dsvg": GC batches and publications take it in their transactions
_CHUNK = 500


class RegistryChangedError(DsvError):
    """The registry's state watermark is not the one GC planned against: nothing of the batch was claimed."""


class ObjectsBeingCollectedError(DsvError):
    """A publication names objects a GC apply is deleting right now; wait for GC, re-put them, publish again."""

    def __init__(self, message: str, digests: Collection[str]) -> None:
        super().__init__(message)
        self.digests = tuple(sorted(digests))


def lock(conn: Connection, *, shared: bool = False) -> None:
    """Serialize with GC batches (PostgreSQL; a SQLite write transaction already is): publications take it ``shared``, so
    they wait only for a GC claim, never for each other; a GC claim takes it exclusively."""
    if conn.dialect.name == "postgresql":
        take = func.pg_advisory_xact_lock_shared if shared else func.pg_advisory_xact_lock
        conn.execute(select(take(_PG_GC_LOCK_ID)))


def pending(conn: Connection, digests: Collection[str]) -> list[str]:
    """The ``digests`` a GC batch is deleting now."""
    wanted = sorted(set(digests))
    found: list[str] = []
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        found += [str(d) for d in conn.execute(select(gc_deletions.c.digest).where(gc_deletions.c.digest.in_(chunk))).scalars()]
    return sorted(found)


def refuse_collected(conn: Connection, digests: Collection[str], *, what: str) -> None:
    """Raise ObjectsBeingCollectedError when a GC batch is deleting any of ``digests`` (inside the caller's locked transaction)."""
    busy = pending(conn, digests)
    if busy:
        raise ObjectsBeingCollectedError(f"{what}: {len(busy)} of its objects are being deleted by GC now (first {busy[0]}); publish again after GC", busy)


def _norm(watermark: Mapping[str, Any]) -> str:
    return json.dumps(watermark, sort_keys=True, default=str)


class RegistryCollection(RegistryTransactions):
    """GC deletion intents (see the module docstring)."""

    def claim_for_deletion(self, digests: Collection[str], *, watermark: Mapping[str, Any], actor: str) -> None:
        """Record ``digests`` as being deleted, if the registry is still at ``watermark``; else RegistryChangedError."""

        def work(conn: Connection) -> None:
            lock(conn)
            current = retention.state_watermark(conn)
            if _norm(current) != _norm(watermark):
                raise RegistryChangedError("the registry changed since the GC plan (a new manifest, publication or root)")
            now = self._now()
            taken = set(pending(conn, digests))
            rows = [{"digest": d, "actor": actor, "recorded_at": now} for d in sorted(set(digests) - taken)]
            if rows:
                conn.execute(insert(gc_deletions), rows)

        self._retrying(work)

    def release_deletion(self, digests: Collection[str]) -> None:
        """Forget the intents of a finished (or failed) batch."""
        wanted = sorted(set(digests))

        def work(conn: Connection) -> None:
            for i in range(0, len(wanted), _CHUNK):
                conn.execute(delete(gc_deletions).where(gc_deletions.c.digest.in_(wanted[i : i + _CHUNK])))

        self._retrying(work)

    def deletions_pending(self, digests: Collection[str]) -> list[str]:
        with self._read() as conn:
            return pending(conn, digests)

    def clear_stale_deletions(self, older_than: datetime) -> int:
        """Drop intents a crashed GC left behind (recorded before ``older_than``); how many."""

        def work(conn: Connection) -> int:
            return int(conn.execute(delete(gc_deletions).where(gc_deletions.c.recorded_at < older_than)).rowcount or 0)

        return self._retrying(work)


__all__ = ["ObjectsBeingCollectedError", "RegistryChangedError", "RegistryCollection", "gc_deletions", "lock", "refuse_collected"]
