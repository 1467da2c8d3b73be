"""Raw landing: source batches written once under content-derived keys, plus a small landing index.

Raw is what everything else can be rebuilt from, so a batch is never overwritten: the same
bytes again are a no-op, other bytes a revision, an unreadable batch is kept but quarantined,
and a privacy deletion crypto-erases a batch and marks it redacted for good.

Details: docs/storage.md
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, cast

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.landing_index import LandingIndex, Record
from dsv_platform.core.config.source import UNPARTITIONED_DAY, LandingFormat, SourceSpec
from dsv_platform.core.errors import DsvError
from dsv_platform.core.ingest.batch import PreparedBatch, RawBatch, parse_batch_file, prepare_batch
from dsv_platform.core.ingest.batch_stream import BatchScan, day_counts
from dsv_platform.core.ingest.landing_format import EXTENSIONS
from dsv_platform.core.ingest.landing_stream import Opener
from dsv_platform.core.ingest.scan_memo import scan_file

INDEX_FILE = "landing_index.db"
"""The SQLite landing index a home kept before migration 22: imported into the registry on first open, then set aside."""


FUTURE_SKEW = dt.timedelta(minutes=5)
"""How far a batch's recorded time may be ahead of the platform's clock (clock skew between hosts)."""


class LandingError(DsvError):
    """A batch cannot land as the given source (another source's batch, another landing format)."""


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
    writer: str | None = None  # the identity that landed it (docs/trust.md); None for batches landed before identities

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

    def __init__(self, store: ObjectStore, index: LandingIndex) -> None:
        """``index``: the landing index in the registry (which imported a home's SQLite index from before when it opened)."""
        self.store = store
        self.index = index
        self.writer: str | None = None
        """The identity recorded as the writer of the batches this zone lands (set by the caller that checked its grant)."""

    def land(self, batch: RawBatch, spec: SourceSpec, *, landed_at: dt.datetime | None = None) -> LandingRecord:
        """Store ``batch`` write-once and index it; the record of its first day (see :meth:`land_all`)."""
        return self.land_all(batch, spec, landed_at=landed_at)[0]

    def land_all(
        self, batch: RawBatch, spec: SourceSpec, *, landed_at: dt.datetime | None = None, prepared: PreparedBatch | None = None
    ) -> list[LandingRecord]:
        """Store ``batch`` write-once and index it once per partition day its accepted rows touch.

        One object, one index row per day (same digest and batch id), each with
        its own status (see the module docstring); ``batch.day``'s record comes
        first when the batch touches it. A batch without readable rows is indexed under ``batch.day``.
        """
        if batch.source != spec.name:
            raise LandingError(f"a batch of source {batch.source!r} cannot land as source {spec.name!r}")
        if batch.format != spec.landing_format:
            raise LandingError(f"source {spec.name!r} lands {spec.landing_format} batches; this batch is {batch.format}")
        check_recorded_time(batch.recorded_at, f"batch {batch.batch_id!r} of {spec.name}", landed_at)
        digest = hashlib.sha256(batch.data).hexdigest()
        if self.redaction(digest) is None:  # a redacted batch's bytes are never stored again
            self.store.put(batch.data)
        prepared = prepared or prepare_batch(batch.data, spec)  # ``prepared``: the caller read these very bytes already
        rows = rows_per_day(prepared, spec, index_day(spec, batch.day))
        return self._index_days(batch, rows, digest, len(batch.data), landed_at, prepared.malformed_reason)

    def land_path(self, path: Path, spec: SourceSpec, batch: RawBatch, scan: BatchScan, *, landed_at: dt.datetime | None = None) -> list[LandingRecord]:
        """:meth:`land_all` of a file read in record batches (``scan``; ``batch`` carries no bytes): stored as a stream."""
        if batch.format != spec.landing_format or batch.source != spec.name:
            raise LandingError(f"source {spec.name!r} lands {spec.landing_format} batches of its own; this batch is {batch.source}/{batch.format}")
        check_recorded_time(batch.recorded_at, f"batch {batch.batch_id!r} of {spec.name}", landed_at)
        digest = file_digest(path)
        if self.redaction(digest) is None:  # a redacted batch's bytes are never stored again
            self.store.put_file(path)
        return self._index_days(batch, scan_days(scan, index_day(spec, batch.day)), digest, path.stat().st_size, landed_at, scan.malformed_reason)

    def _index_days(
        self, batch: RawBatch, rows: dict[dt.date, int], digest: str, size: int, landed_at: dt.datetime | None, reason: str | None
    ) -> list[LandingRecord]:
        when = (landed_at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).isoformat()
        return [self._index(batch, day, digest, count, size, when, reason) for day, count in rows.items()]

    def _index(self, batch: RawBatch, day: dt.date, digest: str, rows: int, size: int, when: str, reason: str | None) -> LandingRecord:
        """Index ``batch`` under ``day`` (UNCHANGED when this digest is indexed there already); one writer per batch id and day at a time."""

        def status(revised: bool) -> str:
            if reason is not None:
                return str(LandingStatus.QUARANTINED.value)
            return str((LandingStatus.REVISED if revised else LandingStatus.LANDED).value)

        values = {
            "source": batch.source,
            "day": day,
            "batch_id": batch.batch_id,
            "digest": digest,
            "size": size,
            "rows": rows,
            "recorded_at": batch.recorded_at,
            "landed_at": dt.datetime.fromisoformat(when),
            "reason": reason,
            "writer": self.writer,
        }
        added, row = self.index.index(values, status)
        return _record(row) if added else self._again(_record(row))

    def _again(self, same: LandingRecord) -> LandingRecord:
        """The outcome of landing bytes already indexed: UNCHANGED, or the redacted record (the object is not brought back)."""
        if self.redaction(same.digest) is not None:  # redacted for privacy: landing the same bytes again does not bring them back
            return self._with_redaction(same)
        return replace(same, status=LandingStatus.UNCHANGED) if same.loadable else same

    def land_file(self, path: str | Path, spec: SourceSpec, *, batch_id: str | None = None, recorded_at: dt.datetime | None = None) -> list[LandingRecord]:
        """Land a file of ``spec``'s landing format (``dsv ingest``); one record per partition day it touches.

        ``batch_id`` defaults to the file's stem (characters outside ``[A-Za-z0-9._-]`` become ``_``),
        ``recorded_at`` to the platform's clock at landing (UTC, the landed time too); the batch's day is the first partition day its rows touch.
        """
        path = Path(path)
        ext = path.suffix.lstrip(".").lower()
        if ext in EXTENSIONS.values() and ext != EXTENSIONS[spec.landing_format]:
            raise LandingError(f"{path.name}: source {spec.name!r} lands {spec.landing_format} files, not {ext}")
        now = dt.datetime.now(dt.UTC)
        when = recorded_at or now  # never the file's modification time: whoever writes the file sets it
        _, scan = scan_file(path, spec)  # the check before the run read these bytes already (scan_memo.py)
        days = scan_days(scan, index_day(spec, when.astimezone(dt.UTC).date()))
        ident = batch_id or sanitize_batch_id(path.stem)
        return self.land_path(path, spec, RawBatch(spec.name, min(days), ident, when, b"", spec.landing_format), scan, landed_at=now)

    def records(self, source: str | None = None, day: dt.date | None = None) -> list[LandingRecord]:
        """Index entries (all, of one source, or of one source and day) in landing order."""
        rows, marks = self.index.rows(source, day)
        return [replace(rec, redacted_generation=marks.get(rec.digest)) for rec in map(_record, rows)]

    # -- privacy redaction ------------------------------------------------------
    def mark_redacted(self, digest: str, generation: int, reason: str, *, at: dt.datetime | None = None) -> bool:
        """Mark every batch of ``digest`` redacted at ``generation``; False (nothing changed) if it was marked before."""
        return self.index.mark_redacted(digest, generation, reason, (at or dt.datetime.now(dt.UTC)).astimezone(dt.UTC))

    def redaction(self, digest: str) -> dict[str, object] | None:
        """The redaction mark of ``digest`` (generation, reason, redacted_at), or None."""
        row = self.index.redaction(digest)
        return None if row is None else {"generation": row["generation"], "reason": row["reason"], "redacted_at": row["redacted_at"].isoformat()}

    def _with_redaction(self, record: LandingRecord) -> LandingRecord:
        mark = self.redaction(record.digest)
        return record if mark is None else replace(record, redacted_generation=int(mark["generation"]))  # type: ignore[call-overload]

    def loadable(self, source: str, day: dt.date) -> list[LandingRecord]:
        """The batches canonical loading applies for a partition, in ``recorded_at`` then landing order."""
        return sorted((r for r in self.records(source, day) if r.loadable), key=lambda r: (r.recorded_at, r.seq))

    def open(self, record: LandingRecord) -> BinaryIO:
        """The landed bytes as a stream, re-hashed against the record's digest at its end."""
        return self.store.open(record.digest)

    def read(self, record: LandingRecord) -> bytes:
        """The landed bytes, re-hashed against the record's digest."""
        return self.store.get(record.digest)

    def raw_batch(self, record: LandingRecord, fmt: LandingFormat = "csv") -> RawBatch:
        return RawBatch(record.source, record.day, record.batch_id, record.recorded_at, self.read(record), fmt)


def _record(row: Record) -> LandingRecord:
    return LandingRecord(
        seq=row["seq"],
        source=row["source"],
        day=row["day"],
        batch_id=row["batch_id"],
        digest=row["digest"],
        size=row["size"],
        rows=row["rows"],
        recorded_at=row["recorded_at"],
        landed_at=row["landed_at"],
        status=LandingStatus(row["status"]),
        reason=row["reason"],
        writer=row["writer"],
    )


def rows_per_day(prepared: PreparedBatch, spec: SourceSpec, day: dt.date) -> dict[dt.date, int]:
    """``{partition day: rows}`` of a prepared batch, ``day`` first; rejected rows count under the first day.

    A batch with no accepted rows (malformed, or every row rejected) is ``{day: rows read}``.
    """
    accepted = prepared.accepted
    counts: dict[dt.date | None, int] = {None: accepted.num_rows} if accepted.num_rows else {}
    if spec.partition_by:
        counts = day_counts(accepted.column(spec.partition_by))
    return _ordered_days(counts, prepared.report.rows, prepared.rejected.num_rows, day)


def index_day(spec: SourceSpec, day: dt.date) -> dt.date:
    """The landing-index day of a batch of ``spec`` arriving on ``day``: :data:`UNPARTITIONED_DAY` for a source without ``partition_by``."""
    return day if spec.partitioned else UNPARTITIONED_DAY


def scan_days(scan: BatchScan, day: dt.date) -> dict[dt.date, int]:
    """:func:`rows_per_day` of a batch read in record batches."""
    return _ordered_days(scan.accepted_days, scan.rows, scan.rejected, day)


def _ordered_days(by_day: Mapping[dt.date | None, int], rows: int, rejected: int, day: dt.date) -> dict[dt.date, int]:
    counts: dict[dt.date, int] = {}
    for key, count in by_day.items():
        named = key if key is not None else day
        counts[named] = counts.get(named, 0) + count
    if not counts:
        return {day: rows}
    ordered = [day] if day in counts else []
    ordered += sorted(d for d in counts if d != day)
    out = {d: counts[d] for d in ordered}
    out[ordered[0]] += rejected
    return out


def file_opener(path: Path) -> Opener:
    """An :data:`Opener` of a file."""
    return lambda: cast(BinaryIO, path.open("rb"))


def file_digest(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_recorded_time(when: dt.datetime, what: str, clock: dt.datetime | None = None) -> None:
    """Refuse (LandingError, INVALID) a recorded time more than :data:`FUTURE_SKEW` ahead of the platform's clock."""
    now = (clock or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    if when > now + FUTURE_SKEW:  # a writer must not choose a time every later honest correction loses to
        raise LandingError(
            f"{what}: recorded time {when.isoformat()} is in the future "
            f"(platform clock {now.isoformat()}); a batch cannot be recorded after it lands"
        )


def sanitize_batch_id(text: str) -> str:
    """A batch id from free text: characters outside ``[A-Za-z0-9._-]`` become ``_`` (at most 100 characters)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100].lstrip("._-")
    return cleaned or "batch"


def drop_file_problem(path: str | Path, sources: Mapping[str, SourceSpec]) -> str | None:
    """Why ``path`` is not a drop-folder batch of a configured source (None when it is one)."""
    name = Path(path).name
    parsed = parse_batch_file(name)
    if parsed is None:
        return f"{name}: not named <source>__<YYYY-MM-DD>__<batch id>.<csv|parquet|jsonl>"
    spec = sources.get(parsed.source)
    if spec is None:
        return f"{name}: unknown source {parsed.source!r}; known: {sorted(sources)}"
    if parsed.format != spec.landing_format:
        return f"{name}: source {spec.name!r} lands {spec.landing_format} files, not {parsed.format}"
    return None


def read_drop_file(path: str | Path, sources: Mapping[str, SourceSpec]) -> RawBatch | None:
    """A drop-folder file as a batch; None if it is not ``<source>__<day>__<batch id>.<format>`` of a
    configured source in that source's landing format (:func:`drop_file_problem` says why).

    Its ``recorded_at`` is the platform's clock when it is read (UTC), never the file's
    modification time, which whoever writes the file controls (docs/trust.md).
    """
    path = Path(path)
    parsed = parse_batch_file(path.name)
    if parsed is None or drop_file_problem(path, sources) is not None:
        return None
    return RawBatch(parsed.source, parsed.day, parsed.batch_id, dt.datetime.now(dt.UTC), path.read_bytes(), parsed.format)
