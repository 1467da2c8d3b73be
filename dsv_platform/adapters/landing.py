"""Raw landing: source batches written once under content-derived keys, plus a small landing index.

``land(batch)`` puts the bytes into the object store (``objects/sha256/...``)
and records ``(source, day, batch id, digest, rows, recorded_at, landed_at,
status, reason)`` in a SQLite index under the platform home. Landing the same
bytes again for the same batch id is a no-op (the existing record comes back
with ``status`` UNCHANGED); other bytes for the same batch id are a new object
and a new index entry (REVISED), never an overwrite. A batch that cannot be
read as its source's format is kept (raw is kept longest) but QUARANTINED with
the reason, and canonical loading skips it.

A privacy deletion removes a batch's object from the store and marks its
digest redacted in the index with the redaction generation (``mark_redacted``):
the mark is written once and never overwritten, a redacted batch is no longer
loadable, and landing the same bytes again does not bring the object back.
"""

from __future__ import annotations

import datetime as dt
import enum
import sqlite3
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

from dsv_platform.adapters.object_store import ObjectStore
from dsv_platform.domain.batch import RawBatch, prepare_batch
from dsv_platform.domain.sources import SOURCES

INDEX_FILE = "landing_index.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS landed_batch (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    day TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    recorded_at TEXT NOT NULL,
    landed_at TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    UNIQUE (source, day, batch_id, digest)
)
"""

_REDACTED_SCHEMA = """
CREATE TABLE IF NOT EXISTS redacted_batch (
    digest TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    reason TEXT NOT NULL,
    redacted_at TEXT NOT NULL
)
"""


class LandingStatus(enum.Enum):
    LANDED = "landed"  # first bytes for this batch id
    REVISED = "revised"  # other bytes for a batch id that had landed before: a new object, nothing overwritten
    QUARANTINED = "quarantined"  # not readable as the source's format; kept, never loaded
    UNCHANGED = "unchanged"  # (returned only) these exact bytes had landed already: nothing written


@dataclass(frozen=True)
class LandingRecord:
    seq: int
    source: str
    day: dt.date
    batch_id: str
    digest: str
    size: int
    rows: int
    recorded_at: dt.datetime
    landed_at: dt.datetime
    status: LandingStatus
    reason: str | None = None
    redacted_generation: int | None = None  # set once a privacy deletion removed the batch's object

    @property
    def redacted(self) -> bool:
        return self.redacted_generation is not None

    @property
    def loadable(self) -> bool:
        return self.status is not LandingStatus.QUARANTINED and not self.redacted

    @property
    def batch_ref(self) -> str:
        """The identity canonical rows carry in ``_batch``: ``<batch id>@<digest>``."""
        return f"{self.batch_id}@{self.digest}"

    def to_document(self) -> dict[str, object]:
        return {
            "source": self.source,
            "day": self.day.isoformat(),
            "batch_id": self.batch_id,
            "digest": self.digest,
            "size": self.size,
            "rows": self.rows,
            "recorded_at": self.recorded_at.isoformat(),
            "landed_at": self.landed_at.isoformat(),
            "status": self.status.value,
            "reason": self.reason,
        }


class LandingZone:
    """The raw store: write-once objects plus the landing index."""

    def __init__(self, store: ObjectStore, index_path: str | Path) -> None:
        self.store = store
        self.index_path = Path(index_path)
        self.index_path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as conn, conn:
            conn.execute(_SCHEMA)
            conn.execute(_REDACTED_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.index_path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.row_factory = sqlite3.Row
        return conn

    def land(self, batch: RawBatch, *, landed_at: dt.datetime | None = None) -> LandingRecord:
        """Store ``batch`` write-once and index it (see the module docstring for the outcomes)."""
        spec = SOURCES.get(batch.source)
        if spec is None:
            raise KeyError(f"unknown source {batch.source!r}; known: {sorted(SOURCES)}")
        digest = self.store.put(batch.data)
        prepared = prepare_batch(batch.data, spec.contract, spec.aliases)
        when = landed_at or dt.datetime.now(dt.UTC)
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                same = conn.execute(
                    "SELECT * FROM landed_batch WHERE source=? AND day=? AND batch_id=? AND digest=?",
                    (batch.source, batch.day.isoformat(), batch.batch_id, digest),
                ).fetchone()
                if same is not None:
                    conn.execute("ROLLBACK")
                    if self.redaction(digest) is not None:
                        self.store.delete(digest)  # deleted for privacy: landing the same bytes again does not bring them back
                        return self._with_redaction(_record(same))
                    return replace(_record(same), status=LandingStatus.UNCHANGED) if _record(same).loadable else _record(same)
                before = conn.execute(
                    "SELECT COUNT(*) FROM landed_batch WHERE source=? AND day=? AND batch_id=?", (batch.source, batch.day.isoformat(), batch.batch_id)
                ).fetchone()[0]
                if prepared.malformed:
                    status = LandingStatus.QUARANTINED
                else:
                    status = LandingStatus.REVISED if before else LandingStatus.LANDED
                cur = conn.execute(
                    "INSERT INTO landed_batch (source, day, batch_id, digest, size, rows, recorded_at, landed_at, status, reason)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        batch.source,
                        batch.day.isoformat(),
                        batch.batch_id,
                        digest,
                        len(batch.data),
                        prepared.report.rows,
                        batch.recorded_at.astimezone(dt.UTC).isoformat(),
                        when.astimezone(dt.UTC).isoformat(),
                        status.value,
                        prepared.malformed_reason,
                    ),
                )
                row = conn.execute("SELECT * FROM landed_batch WHERE seq=?", (cur.lastrowid,)).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return _record(row)

    def records(self, source: str | None = None, day: dt.date | None = None) -> list[LandingRecord]:
        """Index entries (all, of one source, or of one source and day) in landing order."""
        sql, args = "SELECT * FROM landed_batch WHERE 1=1", []
        if source is not None:
            sql, args = sql + " AND source=?", [*args, source]
        if day is not None:
            sql, args = sql + " AND day=?", [*args, day.isoformat()]
        with closing(self._connect()) as conn:
            marks = {r["digest"]: r["generation"] for r in conn.execute("SELECT digest, generation FROM redacted_batch")}
            return [replace(rec, redacted_generation=marks.get(rec.digest)) for rec in (_record(r) for r in conn.execute(sql + " ORDER BY seq", args))]

    # -- privacy redaction ------------------------------------------------------
    def mark_redacted(self, digest: str, generation: int, reason: str, *, at: dt.datetime | None = None) -> bool:
        """Mark every batch of ``digest`` redacted at ``generation``; False (nothing changed) if it was marked before."""
        when = (at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat()
        with closing(self._connect()) as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO redacted_batch (digest, generation, reason, redacted_at) VALUES (?,?,?,?)", (digest, generation, reason, when)
            )
            return cur.rowcount == 1

    def redaction(self, digest: str) -> dict[str, object] | None:
        """The redaction mark of ``digest`` (generation, reason, redacted_at), or None."""
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT * FROM redacted_batch WHERE digest=?", (digest,)).fetchone()
        return None if row is None else {"generation": row["generation"], "reason": row["reason"], "redacted_at": row["redacted_at"]}

    def _with_redaction(self, record: LandingRecord) -> LandingRecord:
        mark = self.redaction(record.digest)
        return record if mark is None else replace(record, redacted_generation=int(mark["generation"]))  # type: ignore[call-overload]

    def loadable(self, source: str, day: dt.date) -> list[LandingRecord]:
        """The batches canonical loading applies for a partition, in ``recorded_at`` then landing order."""
        return sorted((r for r in self.records(source, day) if r.loadable), key=lambda r: (r.recorded_at, r.seq))

    def read(self, record: LandingRecord) -> bytes:
        """The landed bytes, re-hashed against the record's digest."""
        return self.store.get(record.digest)

    def raw_batch(self, record: LandingRecord) -> RawBatch:
        return RawBatch(record.source, record.day, record.batch_id, record.recorded_at, self.read(record))


def _record(row: sqlite3.Row) -> LandingRecord:
    return LandingRecord(
        seq=row["seq"],
        source=row["source"],
        day=dt.date.fromisoformat(row["day"]),
        batch_id=row["batch_id"],
        digest=row["digest"],
        size=row["size"],
        rows=row["rows"],
        recorded_at=dt.datetime.fromisoformat(row["recorded_at"]),
        landed_at=dt.datetime.fromisoformat(row["landed_at"]),
        status=LandingStatus(row["status"]),
        reason=row["reason"],
    )


def read_drop_file(path: str | Path) -> RawBatch | None:
    """A drop-folder file as a batch (None if its name is not ``<source>__<day>__<batch id>.csv``).

    We learn of a dropped file when it appears, so its ``recorded_at`` is the
    file's modification time (UTC).
    """
    from dsv_platform.domain.batch import parse_batch_file_name

    path = Path(path)
    parsed = parse_batch_file_name(path.name)
    if parsed is None:
        return None
    source, day, batch_id = parsed
    recorded_at = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
    return RawBatch(source, day, batch_id, recorded_at, path.read_bytes())
