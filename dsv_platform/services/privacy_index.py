"""The subject index of privacy deletion: which realizations, raw batches and canonical tables hold which (salted) subject.

Mixed into :class:`~dsv_platform.services.privacy.PrivacyCoordinator`; see privacy.py for the procedure.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from dsv_platform.adapters.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.key_store import KeyStore
from dsv_platform.adapters.landing import LandingZone
from dsv_platform.adapters.registry.privacy import IndexEntry
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.privacy import SUBJECT_COLUMNS, Descendant, DescendantKind, subject_key_hash
from dsv_platform.domain.sources import SOURCES, TableSpec

K = DescendantKind


def subject_column(schema: pa.Schema) -> str | None:
    return next((c for c in SUBJECT_COLUMNS if c in schema.names), None)


def subject_hashes(column: pa.ChunkedArray | pa.Array, salt: bytes) -> list[str | None]:
    """The salted hash of every value (None for nulls), computed once per distinct value."""
    values = column.to_pylist()
    memo = {v: subject_key_hash(salt, str(v)) for v in set(values) if v is not None}
    return [None if v is None else memo[v] for v in values]


class SubjectIndexing:
    """Builds and reads the subject index (the attributes are the coordinator's)."""

    registry: Registry
    store: EncryptingObjectStore
    keys: KeyStore
    zone: LandingZone | None
    tables: CanonicalTables | None

    def subject_hash(self, subject_key: str) -> str:
        return subject_key_hash(self.keys.salt(), subject_key)

    def _read(self, digest: str) -> pa.Table | None:
        try:
            return pq.read_table(pa.BufferReader(self.store.get(digest)))
        except (ObjectErasedError, ObjectNotFoundError):
            return None  # erased or deleted before it was indexed: nothing left to find

    def _entries(self, table: pa.Table, kind: DescendantKind, digest: str, manifest_hash: str, dataset: str, version: str) -> list[IndexEntry]:
        column = subject_column(table.schema)
        if column is None:
            return []
        counts: dict[str, int] = {}
        for h in subject_hashes(table.column(column), self.keys.salt()):
            if h is not None:
                counts[h] = counts.get(h, 0) + 1
        encrypted = self.store.is_encrypted(digest)
        return [
            IndexEntry(h, Descendant(kind, digest, manifest_hash, dataset, encrypted, n), version)
            for h, n in sorted(counts.items())
        ]

    def refresh_index(self) -> int:
        """Scan published manifests not yet in the subject index; return how many were scanned."""
        scanned = self.registry.privacy.scanned_manifests()
        done = 0
        for manifest_hash, dataset, version, _state in self.registry.privacy.published_manifests():
            if manifest_hash in scanned:
                continue
            manifest = Manifest.from_json(self.registry.get_manifest(manifest_hash))
            entries: list[IndexEntry] = []
            column: str | None = None
            objects = [(K.PARTITION_OBJECT, p.object) for p in manifest.partitions]
            if manifest.splits is not None:
                objects.append((K.SPLIT_ROWS, manifest.splits.assignment_object))
            for kind, digest in objects:
                table = self._read(digest)
                if table is None:
                    continue
                column = column or subject_column(table.schema)
                entries.extend(self._entries(table, kind, digest, manifest_hash, dataset, version))
            subjects = sorted({e.subject_key_hash for e in entries})
            rows = {h: sum(e.descendant.rows for e in entries if e.subject_key_hash == h and e.descendant.kind is K.PARTITION_OBJECT) for h in subjects}
            entries.extend(IndexEntry(h, Descendant(K.REALIZATION, manifest_hash, manifest_hash, dataset, False, rows[h]), version) for h in subjects)
            done += self.registry.privacy.record_scan(manifest_hash, column, entries)
        if self.zone is not None:
            done += self._refresh_raw(self.zone)
        return done

    def _refresh_raw(self, zone: LandingZone) -> int:
        """Scan the landed raw objects not yet scanned; one RAW_BATCH entry per subject per object."""
        scanned = self.registry.privacy.raw_scanned()
        done = 0
        first: dict[str, Any] = {}
        for record in zone.records():
            first.setdefault(record.digest, record)
        for digest, record in first.items():
            if digest in scanned:
                continue
            table = None if record.redacted else _read_raw(zone, record)
            column = None if table is None else subject_column(table.schema)
            entries: list[IndexEntry] = []
            if table is not None and column is not None:
                counts: dict[str, int] = {}
                for h in subject_hashes(table.column(column), self.keys.salt()):
                    if h is not None:
                        counts[h] = counts.get(h, 0) + 1
                entries = [IndexEntry(h, Descendant(K.RAW_BATCH, digest, None, record.source, False, n), record.batch_id) for h, n in sorted(counts.items())]
            done += self.registry.privacy.record_raw_scan(digest, record.source, column, entries)
        return done

    def _canonical_descendants(self, subject_key: str) -> list[Descendant]:
        """One CANONICAL_ROWS descendant per canonical table whose current snapshot holds the subject."""
        if self.tables is None:
            return []
        found = []
        for spec in _subject_specs():
            column = subject_column(spec.contract.arrow_schema)
            if column is None:
                continue
            rows = self.tables.count_matching(spec, column, subject_key)
            if rows:
                found.append(Descendant(K.CANONICAL_ROWS, self.tables.identifier(spec), None, spec.name, False, rows))
        return found


def _subject_specs() -> list[TableSpec]:
    """Canonical source tables whose contract has a subject column."""
    return [spec for spec in SOURCES.values() if subject_column(spec.contract.arrow_schema) is not None]


def _read_raw(zone: LandingZone, record: Any) -> pa.Table | None:
    """A landed CSV batch with every column as text (the subject column renamed through the source's aliases), or None if unreadable."""
    try:
        data = zone.read(record)
    except (ObjectErasedError, ObjectNotFoundError):
        return None
    try:
        header = next(csv.reader(io.StringIO(data.split(b"\n", 1)[0].decode("utf-8-sig"))))
        table = pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.string())))
    except (pa.ArrowInvalid, ValueError, StopIteration):
        return None
    aliases = SOURCES[record.source].aliases if record.source in SOURCES else {}
    return table.rename_columns([aliases.get(n, n) for n in table.column_names])
