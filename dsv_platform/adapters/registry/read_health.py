"""Consumption health (migration 21): one row per read of a realization through ``open_dataset``'s handle.

A read is one pass of the handle over its objects (``to_arrow``, ``iter_batches``, ``iter_partitions``,
``verify_content``, ...): who read (the consumer identity the platform proved) for what purpose, the time to its
first object's bytes, its bytes, rows and seconds, and the objects it found missing or corrupt. One insert per
read, never per object; :func:`health_summary` folds them per manifest hash for ``dsv status`` and the
``dataset_observability`` asset. Details: docs/configuration.md (Service levels)
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Float, Index, Integer, String, Table, Text, func, insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema as s
from dsv_platform.core import canonical_json

read_health = Table(  # migration 21
    "read_health",
    s.metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", s.UtcDateTime, nullable=False),
    Column("consumer", s.NAME, nullable=False),  # the identity that opened the dataset
    Column("purpose", String(200)),
    Column("ref", Text, nullable=False),
    Column("realization_id", Integer),
    Column("manifest_hash", s.HASH, nullable=False),
    Column("kind", String(40), nullable=False),  # to_arrow, iter_batches, iter_partitions, verify_content, split_assignment
    Column("outcome", String(20), nullable=False),  # OK, STOPPED (the reader stopped early), MISSING, CORRUPT, REDACTED, FAILED
    Column("objects", Integer, nullable=False),
    Column("missing", Integer, nullable=False),
    Column("corrupt", Integer, nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("rows", Integer, nullable=False),
    Column("ttfb_s", Float),  # None: no object's bytes arrived
    Column("seconds", Float, nullable=False),
    Column("detail_json", Text, nullable=False, server_default="{}"),  # the object a failed read named
    Index("ix_read_health_manifest", "manifest_hash"),
)


@dataclass
class ReadMeasure:
    """What one read measured; :func:`record_read` stores it."""

    kind: str
    outcome: str = "OK"
    objects: int = 0
    missing: int = 0
    corrupt: int = 0
    bytes: int = 0
    rows: int = 0
    ttfb_s: float | None = None
    seconds: float = 0.0
    detail: Mapping[str, Any] = field(default_factory=dict)


def record_read(
    conn: Connection, measure: ReadMeasure, *, consumer: str, purpose: str | None, ref: str, realization_id: int | None, manifest_hash: str, now: datetime
) -> None:
    doc = asdict(measure)
    detail = canonical_json.dumps({k: str(v) for k, v in dict(doc.pop("detail")).items()}).decode()
    values = {**doc, "consumer": consumer, "purpose": purpose, "ref": ref, "realization_id": realization_id, "manifest_hash": manifest_hash}
    conn.execute(insert(read_health).values(**values, at=now, detail_json=detail))


def health_summary(conn: Connection, manifest_hashes: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per manifest hash (of ``manifest_hashes``, default all): consumers (the distinct identities), reads, p50 and max
    time to first byte, throughput (bytes and rows over read seconds), missing and corrupt objects.

    Sums in SQL (one grouped query), the median from the times to first byte alone."""
    t = read_health
    where = [] if manifest_hashes is None else [t.c.manifest_hash.in_(sorted(manifest_hashes))]
    sums = [func.count(), func.sum(t.c.seconds), func.sum(t.c.bytes), func.sum(t.c.rows), func.sum(t.c.missing), func.sum(t.c.corrupt)]
    out: dict[str, dict[str, Any]] = {}
    for digest, reads, seconds, nbytes, rows, missing, corrupt in conn.execute(select(t.c.manifest_hash, *sums).where(*where).group_by(t.c.manifest_hash)):
        out[digest] = {"consumers": [], "reads": int(reads), "ttfb": [], "seconds": float(seconds or 0), "bytes": int(nbytes or 0), "rows": int(rows or 0),
                       "missing": int(missing or 0), "corrupt": int(corrupt or 0)}  # fmt: skip
    for digest, consumer in conn.execute(select(t.c.manifest_hash, t.c.consumer).where(*where).distinct().order_by(t.c.consumer)):
        out[digest]["consumers"].append(consumer)
    for digest, ttfb in conn.execute(select(t.c.manifest_hash, t.c.ttfb_s).where(t.c.ttfb_s.is_not(None), *where)):
        out[digest]["ttfb"].append(float(ttfb))
    return {k: _figures(e) for k, e in out.items()}


def _figures(e: dict[str, Any]) -> dict[str, Any]:
    ttfb, seconds = e["ttfb"], e["seconds"]
    return {
        "consumers": e["consumers"],
        "reads": e["reads"],
        "ttfb_p50_s": statistics.median(ttfb) if ttfb else None,
        "ttfb_max_s": max(ttfb) if ttfb else None,
        "bytes_per_s": e["bytes"] / seconds if seconds > 0 else None,
        "rows_per_s": e["rows"] / seconds if seconds > 0 else None,
        "bytes": e["bytes"],
        "rows": e["rows"],
        "missing": e["missing"],
        "corrupt": e["corrupt"],
    }
