"""Privacy deletion: the subject index built from data, and the idempotent deletion coordinator.

Plan, then guarded apply (STYLE.md "Destructive operations"):

1. ``refresh_index`` scans every published manifest not yet scanned for a
   subject column (``core.privacy.SUBJECT_COLUMNS``) and records, per salted
   subject hash, the partition and split objects and the realization; with a
   landing zone, it also scans every landed raw object not yet scanned and
   records the raw batches (RAW_BATCH, by object digest) holding each subject.
2. ``plan`` turns the subject's index entries into one decision per descendant;
   with canonical tables, it adds one CANONICAL_ROWS descendant per canonical
   table whose current snapshot holds the subject (an Iceberg scan with
   ``EqualTo(account_id, key)``).
3. ``apply`` first reconciles a key store that is behind the registry, refuses
   a plan computed at another redaction generation (unless it reruns a
   recorded request), records the request with a new redaction generation in
   one transaction, then per decision: destroys the key (CRYPTO_ERASED),
   deletes a plain object (DELETED), marks a realization REDACTED with the
   generation, deletes a raw batch's object and marks it redacted in the
   landing index (DELETED) or keeps it (RETAINED under a legal basis for
   ``raw_batch``), and records the outcome. Canonical rows go last: a row-level
   delete on the current snapshot (copy-on-write, so new realizations cannot
   see them); then the tags of REDACTED realizations that pin an older snapshot
   still holding the subject are removed, and every such snapshot no tag
   protects any more is expired (its data files are left to GC's orphan-file
   collection). Snapshots a live (e.g. retained) realization still pins stay,
   and the outcome lists them with their tags. Finally the key store's
   watermark is advanced and the request completed.

Failure semantics: a crash anywhere leaves the registry's generation ahead of
the key store's watermark, so every read is refused (RedactionNotReconciledError)
until a rerun (same request id: no new generation, already-recorded outcomes
are kept) or ``reconcile`` finishes the work. Erasing, deleting and redacting
are idempotent. The coordinator assumes one deletion runs at a time (the
Dagster job runs with concurrency 1).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pyiceberg.expressions import EqualTo

from dsv_platform.adapters.encrypted_store import EncryptingObjectStore, build_encrypted_store
from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.landing import LandingZone
from dsv_platform.adapters.registry.privacy import IndexEntry, PrivacyRequest
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, ObjectErasedError, ObjectNotFoundError
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.privacy import (
    OBJECT_KINDS,
    SUBJECT_COLUMNS,
    Decision,
    DeletionPlan,
    Descendant,
    DescendantKind,
    Outcome,
    plan_deletion,
    subject_key_hash,
)
from dsv_platform.core.states import RealizationState
from dsv_platform.settings import Settings
from dsv_platform.domain.sources import SOURCES, TableSpec

K = DescendantKind


class StalePlanError(DsvError):
    """The plan was computed at another redaction generation: plan again."""


@dataclass(frozen=True)
class DeletionReport:
    request_id: str
    subject_key_hash: str
    generation: int
    created: bool
    plan: DeletionPlan
    outcomes: list[dict[str, Any]]
    models: list[dict[str, Any]]
    applied: bool = True

    def to_document(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "subject_key_hash": self.subject_key_hash,
            "redaction_generation": self.generation,
            "new_request": self.created,
            "applied": self.applied,
            "plan_hash": self.plan.plan_hash,
            "affected_realizations": self.plan.affected_realizations,
            "outcomes": self.outcomes,
            "models_for_governance": self.models,
        }


@dataclass
class ReconcileReport:
    registry_generation: int
    key_store_generation_before: int
    reapplied: list[dict[str, Any]] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)

    def to_document(self) -> dict[str, Any]:
        return {
            "registry_generation": self.registry_generation,
            "key_store_generation_before": self.key_store_generation_before,
            "reapplied": self.reapplied,
            "redacted": self.redacted,
        }


def subject_column(schema: pa.Schema) -> str | None:
    return next((c for c in SUBJECT_COLUMNS if c in schema.names), None)


def subject_hashes(column: pa.ChunkedArray | pa.Array, salt: bytes) -> list[str | None]:
    """The salted hash of every value (None for nulls), computed once per distinct value."""
    values = column.to_pylist()
    memo = {v: subject_key_hash(salt, str(v)) for v in set(values) if v is not None}
    return [None if v is None else memo[v] for v in values]


class PrivacyCoordinator:
    """Subject index, plan, apply, reconcile and status over one registry and one encrypting store."""

    def __init__(
        self, registry: Registry, store: EncryptingObjectStore, *, actor: str, zone: LandingZone | None = None, tables: CanonicalTables | None = None
    ) -> None:
        self.registry = registry
        self.store = store
        self.keys = store.keys
        self.actor = actor
        self.zone = zone
        self.tables = tables
        self._subject_keys: dict[str, str] = {}  # hash -> key, only for subjects planned in this process (never stored)

    def subject_hash(self, subject_key: str) -> str:
        return subject_key_hash(self.keys.salt(), subject_key)

    # ------------------------------------------------------------ subject index

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
            if column is None or not self.tables.exists(spec):
                continue
            tbl = self.tables.table(spec)
            if tbl.current_snapshot() is None:
                continue
            rows = tbl.scan(row_filter=EqualTo(column, subject_key), selected_fields=(column,)).to_arrow().num_rows
            if rows:
                found.append(Descendant(K.CANONICAL_ROWS, self.tables.identifier(spec), None, spec.name, False, rows))
        return found

    # ------------------------------------------------------------ plan and apply

    def plan(self, subject_key: str, reason: str, *, retain: Mapping[DescendantKind, str] | None = None) -> DeletionPlan:
        """What deleting ``subject_key`` does (nothing is changed; the index is brought up to date)."""
        self.refresh_index()
        subject = self.subject_hash(subject_key)
        self._subject_keys[subject] = subject_key
        descendants = [
            Descendant(K(r.kind), r.descendant_id, r.manifest_hash, r.dataset, K(r.kind) in OBJECT_KINDS and self.store.is_encrypted(r.descendant_id), r.rows)
            for r in self.registry.privacy.index_rows(subject)
        ]
        descendants.extend(self._canonical_descendants(subject_key))
        return plan_deletion(subject, reason, descendants, retain=retain, generation=self.registry.redaction_generation())

    def apply(self, plan: DeletionPlan, *, request_id: str | None = None) -> DeletionReport:
        """Carry out ``plan`` (see the module docstring); rerunning the same request changes nothing twice."""
        rid = request_id or f"privacy-{plan.subject_key_hash[:32]}"
        known = {r.request_id: r for r in self.registry.privacy.requests(plan.subject_key_hash)}
        if rid not in known and plan.based_on_generation != self.registry.redaction_generation():
            raise StalePlanError(
                f"the deletion plan {plan.plan_hash[:12]} was computed at redaction generation {plan.based_on_generation}, "
                f"the registry is now at {self.registry.redaction_generation()}: plan again"
            )
        self.reconcile()
        request, created = self.registry.privacy.begin_request(rid, plan.subject_key_hash, reason=plan.reason, actor=self.actor)
        # objects and raw batches first, then realizations (REDACTED), then canonical rows (whose snapshots those realizations pinned)
        order = {K.REALIZATION: 1, K.CANONICAL_ROWS: 2}
        for decision in sorted(plan.decisions, key=lambda d: order.get(d.descendant.kind, 0)):
            detail = self._carry_out(decision, request, plan.subject_key_hash)
            self.registry.privacy.record_outcome(request, decision, detail)
        self.keys.set_generation(max(self.keys.generation(), request.generation))
        self.registry.privacy.complete_request(rid)
        return DeletionReport(
            request_id=rid,
            subject_key_hash=plan.subject_key_hash,
            generation=request.generation,
            created=created,
            plan=plan,
            outcomes=self.registry.privacy.outcomes(request_id=rid),
            models=self.registry.privacy.models_using(plan.affected_realizations),
        )

    def delete(
        self, subject_key: str, reason: str, *, retain: Mapping[DescendantKind, str] | None = None, apply: bool = True, request_id: str | None = None
    ) -> DeletionReport:
        """Plan and (unless ``apply`` is False: a dry run) apply the deletion of one subject."""
        plan = self.plan(subject_key, reason, retain=retain)
        if apply:
            return self.apply(plan, request_id=request_id)
        rid = request_id or f"privacy-{plan.subject_key_hash[:32]}"
        preview = [{**d.to_document(), "request_id": rid} for d in plan.decisions]
        return DeletionReport(rid, plan.subject_key_hash, plan.based_on_generation, False, plan, preview, self.registry.privacy.models_using(plan.affected_realizations), applied=False)

    def _carry_out(self, decision: Decision, request: PrivacyRequest, subject: str) -> dict[str, Any]:
        d = decision.descendant
        if decision.outcome is Outcome.DELETED and d.kind is K.RAW_BATCH:
            return self._delete_raw(d.id, request.generation, f"privacy deletion {request.request_id}: {request.reason}")
        if decision.outcome is Outcome.DELETED and d.kind is K.CANONICAL_ROWS:
            return self._delete_canonical(d, subject)
        if decision.outcome is Outcome.CRYPTO_ERASED:
            return {"sealed_object": self.store.erase(d.id)}
        if decision.outcome is Outcome.DELETED and d.kind in OBJECT_KINDS:
            sealed = self.store.keys.sealed(d.id)
            return {"existed": self.store.delete(d.id), "sealed_object": sealed}
        if decision.outcome is Outcome.DELETED and d.kind is K.REALIZATION:
            return self._redact(d.id, request.generation, f"privacy deletion {request.request_id}: {request.reason}")
        return {}

    def _delete_raw(self, digest: str, generation: int, reason: str) -> dict[str, Any]:
        """Delete the raw object (never overwrite it) and mark its landing entries redacted with the generation; idempotent."""
        if self.zone is None:
            raise DsvError("a raw batch deletion needs the landing zone: build the PrivacyCoordinator with zone=")
        existed = self.zone.store.delete(digest)
        self.zone.mark_redacted(digest, generation, reason)
        return {"existed": existed, "landing_mark": self.zone.redaction(digest)}

    def _subject_key_for(self, spec: TableSpec, column: str, subject: str) -> str | None:
        """The key of ``subject``: remembered from ``plan`` in this process, else found by hashing the table's subject column."""
        if subject in self._subject_keys:
            return self._subject_keys[subject]
        assert self.tables is not None
        values = self.tables.table(spec).scan(selected_fields=(column,)).to_arrow().column(column)
        salt = self.keys.salt()
        return next((str(v) for v in set(values.to_pylist()) if v is not None and subject_key_hash(salt, str(v)) == subject), None)

    def _delete_canonical(self, d: Descendant, subject: str) -> dict[str, Any]:
        """Row-level delete on the current snapshot, then release and expire older snapshots that still hold the subject."""
        if self.tables is None:
            raise DsvError("a canonical rows deletion needs the canonical tables: build the PrivacyCoordinator with tables=")
        spec = next(s for s in _subject_specs() if self.tables.identifier(s) == d.id)
        column = subject_column(spec.contract.arrow_schema)
        assert column is not None
        key = self._subject_key_for(spec, column, subject)
        if key is None:
            return {"table": d.id, "rows": 0, "note": "no rows of the subject left in the current snapshot"}
        where = EqualTo(column, key)
        deletion = self.tables.delete_rows(spec, where)
        holding = set(self.tables.snapshots_matching(spec, where))
        pinned_by: dict[int, list[str]] = {}
        for tag, sid in self.tables.tags(spec).items():
            if sid in holding:
                pinned_by.setdefault(sid, []).append(tag)
        states = self._tag_states(spec.name)
        release = sorted(t for tags in pinned_by.values() for t in tags if states.get(t) == RealizationState.REDACTED.value)
        removed = self.tables.remove_tags(spec, release)
        still = {sid: sorted(t for t in tags if t not in removed) for sid, tags in pinned_by.items()}
        still = {sid: tags for sid, tags in still.items() if tags}
        expired = self.tables.expire(spec, sorted(holding - set(still)))
        return {
            **deletion.to_document(),
            "removed_tags": removed,
            "expired_snapshots": expired,
            "protected_snapshots": {str(sid): [{"tag": t, "realization_state": states.get(t)} for t in tags] for sid, tags in sorted(still.items())},
            "note": "expired snapshots' data files are removed by GC orphan-file collection; protected snapshots are released when the realizations pinning them are REDACTED or expire",
        }

    def _tag_states(self, table: str) -> dict[str, str]:
        """Tag on ``table`` -> the current state of the published realization whose manifest pins it."""
        out: dict[str, str] = {}
        for manifest_hash, _dataset, _version, state in self.registry.privacy.published_manifests():
            manifest = Manifest.from_json(self.registry.get_manifest(manifest_hash))
            for pin in manifest.sources:
                if pin.table == table:
                    out[pin.tag] = state
        return out

    def _redact(self, manifest_hash: str, generation: int, reason: str) -> dict[str, Any]:
        realization = self.registry.find_by_manifest_hash(manifest_hash)
        if realization is None:
            return {"realization_id": None}
        if realization.state is not RealizationState.REDACTED:
            realization = self.registry.transition(realization.id, RealizationState.REDACTED, reason=reason, actor=self.actor, redaction_generation=generation)
        return {"realization_id": realization.id, "ref": realization.ref}

    # ------------------------------------------------------------ restored backups

    def reconcile(self) -> ReconcileReport:
        """Bring the key store and the registry to the same redaction generation after a restored backup.

        Key store behind (an old key/object store backup): re-apply every
        recorded erasure and deletion newer than its watermark, then advance it.
        Registry behind (an old registry backup): raise the registry's generation
        to the key store's and mark REDACTED every published realization whose
        objects the key store has erased.
        """
        registry_gen, keys_gen = self.registry.redaction_generation(), self.keys.generation()
        report = ReconcileReport(registry_gen, keys_gen)
        if keys_gen < registry_gen:
            for outcome in self.registry.privacy.outcomes(after_generation=keys_gen):
                if outcome["outcome"] == Outcome.CRYPTO_ERASED.value:
                    self.keys.destroy(outcome["id"])
                    report.reapplied.append(outcome)
                elif outcome["outcome"] == Outcome.DELETED.value and K(outcome["kind"]) in OBJECT_KINDS:
                    self.store.delete(outcome["id"])
                    report.reapplied.append(outcome)
                elif outcome["outcome"] == Outcome.DELETED.value and K(outcome["kind"]) is K.RAW_BATCH and self.zone is not None:
                    self._delete_raw(outcome["id"], int(outcome["generation"]), f"reconciled: privacy deletion {outcome['request_id']}")
                    report.reapplied.append(outcome)
            self.keys.set_generation(registry_gen)
        elif keys_gen > registry_gen:
            generation = registry_gen
            while generation < keys_gen:
                generation = self.registry.raise_redaction_generation("0" * 64, reason="reconciled after a registry backup was restored", actor=self.actor)
            for manifest_hash, _dataset, _version, state in self.registry.privacy.published_manifests():
                manifest = Manifest.from_json(self.registry.get_manifest(manifest_hash))
                digests = [p.object for p in manifest.partitions] + ([manifest.splits.assignment_object] if manifest.splits else [])
                if state != RealizationState.REDACTED.value and any(self.keys.is_erased(x) for x in digests):
                    self._redact(manifest_hash, generation, "reconciled: its objects were crypto-erased before the registry backup was restored")
                    report.redacted.append(manifest_hash)
            self.keys.set_generation(generation)
        return report

    # ------------------------------------------------------------ status and exclusion

    def status(self, subject_key: str) -> dict[str, Any]:
        subject = self.subject_hash(subject_key)
        requests = self.registry.privacy.requests(subject)
        return {
            "subject_key_hash": subject,
            "deleted": bool(requests),
            "requests": [{"request_id": r.request_id, "generation": r.generation, "reason": r.reason, "completed": r.completed} for r in requests],
            "outcomes": [o for r in requests for o in self.registry.privacy.outcomes(request_id=r.request_id)],
            "indexed_descendants": len(self.registry.privacy.index_rows(subject)),
            "registry_generation": self.registry.redaction_generation(),
            "key_store_generation": self.keys.generation(),
        }

    def exclusion_filter(self) -> Callable[[pa.Table], pa.Table]:
        """A Publisher ``row_filter`` that drops rows of every deleted subject (new realizations exclude them)."""
        deleted = self.registry.privacy.deleted_subjects()
        salt = self.keys.salt()

        def keep(table: pa.Table) -> pa.Table:
            column = subject_column(table.schema)
            if column is None or not deleted:
                return table
            mask = [h is None or h not in deleted for h in subject_hashes(table.column(column), salt)]
            return table.filter(pa.array(mask, type=pa.bool_()))

        return keep


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


__all__ = ["DeletionReport", "PrivacyCoordinator", "build_coordinator", "ReconcileReport", "StalePlanError", "subject_column", "subject_hashes"]


def build_coordinator(settings: Settings, *, actor: str | None = None) -> PrivacyCoordinator:
    """The coordinator over everything a subject can be in: realizations, raw landing and canonical tables."""
    return PrivacyCoordinator(
        Registry.from_url(settings.registry_url),
        build_encrypted_store(settings),
        actor=actor or settings.actor,
        zone=LandingZone.from_settings(settings),
        tables=CanonicalTables.from_settings(settings),
    )
