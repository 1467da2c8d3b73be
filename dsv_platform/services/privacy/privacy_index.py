"""The subject index of privacy deletion: which realizations, raw batches and canonical tables hold which (salted) subject.

Mixed into :class:`~dsv_platform.services.privacy.privacy.PrivacyCoordinator`; see privacy.py for the procedure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.key_store import KeyStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.registry.privacy import IndexEntry
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.errors import EnvironmentSetupError, ObjectErasedError, ObjectNotFoundError
from dsv_platform.core.ingest.landing_format import read_batch_table
from dsv_platform.core.privacy.privacy import Descendant, DescendantKind, keyed_hash, subject_key_hash, subject_key_id
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.services.privacy.governance import obligation_documents

K = DescendantKind


def subject_column(schema: pa.Schema, candidates: Sequence[str]) -> str | None:
    """The first of ``candidates`` (subject columns, e.g. the sources' entities) that ``schema`` has."""
    return next((c for c in candidates if c in schema.names), None)


def entity_columns(config: PlatformConfig | None) -> tuple[str, ...]:
    """Every configured source's entity (subject) column, each once, in source order."""
    if config is None:
        return ()
    return tuple(dict.fromkeys(s.entity for s in config.sources.values() if s.entity is not None))


def dataset_subjects(config: PlatformConfig | None, dataset: str, version: str) -> tuple[str, ...]:
    """The subject columns of a dataset's realizations: its sources' entities present in its output contract.

    A dataset the configuration does not (or no longer) define falls back to every source's entity.
    """
    if config is None:
        return ()
    for d in config.datasets:
        if (d.name, d.version) == (dataset, version):
            entities = [config.sources[s].entity for s in d.sources if s in config.sources]
            return tuple(dict.fromkeys(e for e in entities if e is not None and e in d.contract.column_names))
    return entity_columns(config)


def subject_hashes(column: pa.ChunkedArray | pa.Array, salt: bytes, key: bytes | None = None) -> list[str | None]:
    """The (keyed) salted hash of every value (None for nulls), computed once per distinct value."""
    values = column.to_pylist()
    memo = {v: subject_key_hash(salt, str(v), key) for v in set(values) if v is not None}
    return [None if v is None else memo[v] for v in values]


class SubjectIndexing:
    """Builds and reads the subject index (the attributes are the coordinator's)."""

    registry: Registry
    store: EncryptingObjectStore
    keys: KeyStore
    zone: LandingZone | None
    tables: CanonicalTables | None
    config: PlatformConfig | None
    actor: str
    subject_key: bytes | None  # the key of subject hashes (privacy_key.py); None: plain salted hashes
    _key_checked: bool

    def hash_key(self) -> bytes | None:
        """The key subject hashes are keyed with, checked once against the registry (fail closed on a mismatch).

        The first use of a key on a registry of plain salted hashes keys every recorded hash in place and records the key's id.
        """
        if self._key_checked:
            return self.subject_key
        recorded = self.registry.privacy.subject_key_id()
        if self.subject_key is None and recorded is not None:
            raise EnvironmentSetupError(f"this registry's subject hashes are keyed (key id {recorded}): the subject-hash key is needed (DSV_SUBJECT_KEY_FILE)")
        if self.subject_key is not None:
            key, kid = self.subject_key, subject_key_id(self.subject_key)
            recorded = recorded or self.registry.privacy.adopt_subject_key(kid, lambda h: keyed_hash(key, h), actor=self.actor)
            if recorded != kid:
                raise EnvironmentSetupError(
                    f"DSV_SUBJECT_KEY_FILE holds subject-hash key {kid}, but this registry's subject hashes are keyed with {recorded}: "
                    "point DSV_SUBJECT_KEY_FILE at that key"
                )
        self._key_checked = True
        return self.subject_key

    def subject_hash(self, subject_key: str) -> str:
        return subject_key_hash(self.keys.salt(), subject_key, self.hash_key())

    def _read(self, digest: str) -> pa.Table | None:
        try:
            return pq.read_table(pa.BufferReader(self.store.get(digest)))
        except (ObjectErasedError, ObjectNotFoundError):
            return None  # erased or deleted before it was indexed: nothing left to find

    def _entries(self, table: pa.Table, kind: DescendantKind, digest: str, manifest_hash: str, dataset: str, version: str) -> list[IndexEntry]:
        column = subject_column(table.schema, dataset_subjects(self.config, dataset, version))
        if column is None:
            return []
        counts: dict[str, int] = {}
        for h in subject_hashes(table.column(column), self.keys.salt(), self.hash_key()):
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
                column = column or subject_column(table.schema, dataset_subjects(self.config, dataset, version))
                entries.extend(self._entries(table, kind, digest, manifest_hash, dataset, version))
            rows: dict[str, int] = {}  # subject -> its rows in the partitions (one pass: a realization holds many subjects)
            for e in entries:
                rows[e.subject_key_hash] = rows.get(e.subject_key_hash, 0) + (e.descendant.rows if e.descendant.kind is K.PARTITION_OBJECT else 0)
            entries.extend(IndexEntry(h, Descendant(K.REALIZATION, manifest_hash, manifest_hash, dataset, False, rows[h]), version) for h in sorted(rows))
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
            spec = self.config.sources.get(record.source) if self.config is not None else None
            table = None if record.redacted or spec is None else _read_raw(zone, record, spec)
            column = None if table is None or spec is None or spec.entity is None else spec.entity
            entries: list[IndexEntry] = []
            if table is not None and column is not None:
                counts: dict[str, int] = {}
                for h in subject_hashes(table.column(column), self.keys.salt(), self.hash_key()):
                    if h is not None:
                        counts[h] = counts.get(h, 0) + 1
                entries = [IndexEntry(h, Descendant(K.RAW_BATCH, digest, None, record.source, False, n), record.batch_id) for h, n in sorted(counts.items())]
            done += self.registry.privacy.record_raw_scan(digest, record.source, column, entries)
        return done

    def subject_specs(self) -> list[SourceSpec]:
        """The configured sources that declare an entity (subject) column."""
        return [] if self.config is None else [s for s in self.config.sources.values() if s.entity is not None]

    def _canonical_descendants(self, subject_key: str) -> list[Descendant]:
        """One CANONICAL_ROWS descendant per canonical table whose current snapshot holds the subject."""
        if self.tables is None:
            return []
        found = []
        for spec in self.subject_specs():
            column = spec.entity
            if column is None:
                continue
            rows = self.tables.count_matching(spec, column, subject_key)
            if rows:
                found.append(Descendant(K.CANONICAL_ROWS, self.tables.identifier(spec), None, spec.name, False, rows))
        return found

    def status(self, subject_key: str) -> dict[str, Any]:
        subject = self.subject_hash(subject_key)
        requests = self.registry.privacy.requests(subject)
        return {
            "subject_key_hash": subject,
            "deleted": bool(requests),
            "requests": [{"request_id": r.request_id, "generation": r.generation, "reason": r.reason, "completed": r.completed} for r in requests],
            "outcomes": [o for r in requests for o in self.registry.privacy.outcomes(request_id=r.request_id)],
            "indexed_descendants": len(self.registry.privacy.index_rows(subject)),
            "model_obligations": obligation_documents(self.registry, [r.request_id for r in requests]),  # open, overdue or closed
            "registry_generation": self.registry.redaction_generation(),
            "key_store_generation": self.keys.generation(),
        }

    def exclusion_filter(self, columns: Sequence[str] | None = None) -> Callable[[pa.Table], pa.Table]:
        """A Publisher ``row_filter`` that drops rows of every deleted subject (new realizations exclude them).

        ``columns`` are the subject columns to check (default: every configured source's entity).
        """
        key = self.hash_key()
        deleted = self.registry.privacy.deleted_subjects()
        salt = self.keys.salt()
        subjects = tuple(columns) if columns is not None else entity_columns(self.config)

        def keep(table: pa.Table) -> pa.Table:
            present = [c for c in subjects if c in table.schema.names]
            if not present or not deleted:
                return table
            mask = [True] * table.num_rows
            for column in present:
                mask = [m and (h is None or h not in deleted) for m, h in zip(mask, subject_hashes(table.column(column), salt, key), strict=True)]
            return table.filter(pa.array(mask, type=pa.bool_()))

        return keep


def _read_raw(zone: LandingZone, record: Any, spec: SourceSpec) -> pa.Table | None:
    """A landed batch's contract columns by the source's landing format (through its aliases), or None if unreadable."""
    try:
        data = zone.read(record)
    except (ObjectErasedError, ObjectNotFoundError):
        return None
    table = read_batch_table(data, spec)
    return None if isinstance(table, str) else table
