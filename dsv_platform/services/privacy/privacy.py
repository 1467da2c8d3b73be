"""Privacy deletion: the subject index built from data, and the idempotent deletion coordinator.

Plan, then guarded apply (destructive operations: a plan first, then a guarded apply): ``refresh_index``, ``plan``,
``apply``. A crash anywhere leaves every read refused until a rerun or ``reconcile`` finishes
the work; erasing, deleting and redacting are idempotent; one deletion runs at a time.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.registry.privacy import PrivacyRequest
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.errors import DsvError
from dsv_platform.core.privacy.privacy import (
    OBJECT_KINDS,
    Decision,
    DeletionPlan,
    Descendant,
    DescendantKind,
    Outcome,
    plan_deletion,
    subject_key_hash,
)
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.privacy.privacy_index import SubjectIndexing, entity_columns, subject_column, subject_hashes
from dsv_platform.services.privacy.privacy_sweep import purge_unreferenced_files, snapshot_files, sweep_staging
from dsv_platform.services.trust.trust import Gatekeeper, gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

K = DescendantKind


class PrivacyPlanStaleError(DsvError):
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
    staging: list[dict[str, Any]] = field(default_factory=list)

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
            "staged_parts": self.staging,
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


class PrivacyCoordinator(SubjectIndexing):
    """Subject index, plan, apply, reconcile and status over one registry and one encrypting store."""

    def __init__(
        self,
        registry: Registry,
        store: EncryptingObjectStore,
        *,
        actor: str,
        zone: LandingZone | None = None,
        tables: CanonicalTables | None = None,
        config: PlatformConfig | None = None,
        gate: Gatekeeper | None = None,
    ) -> None:
        """``config`` names the subject columns (the sources' entities); without it nothing is indexed as a subject.

        With ``gate``, planning and applying a deletion need the privacy_officer role, and each applied request is audited
        under the subject's salted hash (never the subject's key).
        """
        self.gate = gate
        self.registry = registry
        self.config = config
        self.store = store
        self.keys = store.keys
        self.actor = actor
        self.zone = zone
        self.tables = tables
        self._subject_keys: dict[str, str] = {}  # hash -> key, only for subjects planned in this process (never stored)

    # ------------------------------------------------------------ plan and apply

    def plan(self, subject_key: str, reason: str, *, retain: Mapping[DescendantKind, str] | None = None) -> DeletionPlan:
        """What deleting ``subject_key`` does (nothing is changed; the index is brought up to date)."""
        if self.gate is not None:
            self.gate.require(Role.PRIVACY_OFFICER)
        self.refresh_index()
        subject = self.subject_hash(subject_key)
        self._subject_keys[subject] = subject_key
        descendants = [
            Descendant(K(r.kind), r.descendant_id, r.manifest_hash, r.dataset, self._encrypted(K(r.kind), r.descendant_id), r.rows)
            for r in self.registry.privacy.index_rows(subject)
        ]
        descendants.extend(self._canonical_descendants(subject_key))
        return plan_deletion(subject, reason, descendants, retain=retain, generation=self.registry.redaction_generation())

    def apply(self, plan: DeletionPlan, *, request_id: str | None = None) -> DeletionReport:
        """Carry out ``plan`` (see the module docstring); rerunning the same request changes nothing twice."""
        if self.gate is not None:
            self.gate.require(Role.PRIVACY_OFFICER)
        rid = request_id or f"privacy-{plan.subject_key_hash[:32]}"
        known = {r.request_id: r for r in self.registry.privacy.requests(plan.subject_key_hash)}
        if rid not in known and plan.based_on_generation != self.registry.redaction_generation():
            raise PrivacyPlanStaleError(
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
        staging = self._sweep_staging(plan)
        self.keys.set_generation(max(self.keys.generation(), request.generation))
        self.registry.privacy.complete_request(rid)
        if self.gate is not None and not (rid in known and known[rid].completed):  # this call completed it; the salted hash, never the key
            audited = {"request_id": rid, "generation": request.generation}
            self.gate.audit("privacy.delete", f"subject:{plan.subject_key_hash}", reason=plan.reason, detail=audited)
        return DeletionReport(
            request_id=rid,
            subject_key_hash=plan.subject_key_hash,
            generation=request.generation,
            created=created,
            plan=plan,
            outcomes=self.registry.privacy.outcomes(request_id=rid),
            models=self.registry.privacy.models_using(plan.affected_realizations),
            staging=staging,
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
        models = self.registry.privacy.models_using(plan.affected_realizations)
        return DeletionReport(rid, plan.subject_key_hash, plan.based_on_generation, False, plan, preview, models, applied=False)

    def _carry_out(self, decision: Decision, request: PrivacyRequest, subject: str) -> dict[str, Any]:
        d = decision.descendant
        if d.kind is K.RAW_BATCH and decision.outcome in (Outcome.DELETED, Outcome.CRYPTO_ERASED):
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

    def _sweep_staging(self, plan: DeletionPlan) -> list[dict[str, Any]]:
        """Staged parts of killed or failed builds holding the subject: keys erased, parts removed (privacy_sweep.py)."""
        subject_key = self._subject_keys.get(plan.subject_key_hash)
        if subject_key is None:  # a plan from another process: its key is never stored
            return []
        keep = {d.descendant.id for d in plan.decisions if d.outcome is Outcome.RETAINED}
        return sweep_staging(self.store, subject_key, keep=keep)

    def _encrypted(self, kind: DescendantKind, digest: str) -> bool:
        """An object (or a raw batch landed through an encrypting store) stored encrypted under its own key."""
        if kind is K.RAW_BATCH:
            zone_store = self.zone.store if self.zone is not None else None
            return isinstance(zone_store, EncryptingObjectStore) and zone_store.is_encrypted(digest)
        return kind in OBJECT_KINDS and self.store.is_encrypted(digest)

    def _delete_raw(self, digest: str, generation: int, reason: str) -> dict[str, Any]:
        """Crypto-erase the raw object (delete it if it was landed in the clear), then mark its landing entries redacted; idempotent."""
        if self.zone is None:
            raise DsvError("a raw batch deletion needs the landing zone: build the PrivacyCoordinator with zone=")
        store = self.zone.store
        if isinstance(store, EncryptingObjectStore) and store.is_encrypted(digest):
            detail: dict[str, Any] = {"sealed_object": store.erase(digest)}
        else:
            detail = {"existed": store.delete(digest)}
        self.zone.mark_redacted(digest, generation, reason)
        return {**detail, "landing_mark": self.zone.redaction(digest)}

    def _subject_key_for(self, spec: SourceSpec, column: str, subject: str) -> str | None:
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
        spec = next(s for s in self.subject_specs() if self.tables.identifier(s) == d.id)
        column = spec.entity
        assert column is not None
        key = self._subject_key_for(spec, column, subject)
        if key is None:
            return {"table": d.id, "rows": 0, "note": "no rows of the subject left in the current snapshot"}
        where = (column, key)
        deletion = self.tables.delete_rows(spec, where)
        holding = set(self.tables.snapshots_matching(spec, where))
        pinned_by: dict[int, list[str]] = {}
        for tag, sid in self.tables.tags(spec).items():
            if sid in holding:
                pinned_by.setdefault(sid, []).append(tag)
        states = self._tag_states(spec.name)
        # pins of REDACTED realizations, and of builds that never published (killed, failed or racing this deletion)
        release = sorted(t for tags in pinned_by.values() for t in tags if states.get(t) in (None, RealizationState.REDACTED.value))
        removed = self.tables.remove_tags(spec, release)
        still = {sid: sorted(t for t in tags if t not in removed) for sid, tags in pinned_by.items()}
        still = {sid: tags for sid, tags in still.items() if tags}
        tbl = self.tables.catalog.load_table(d.id)
        candidates = snapshot_files(tbl, holding - set(still))
        expired = self.tables.expire(spec, sorted(holding - set(still)))
        purged = purge_unreferenced_files(self.tables.catalog.load_table(d.id), candidates) if expired else []
        return {
            **deletion.to_document(),
            "removed_tags": removed,
            "expired_snapshots": expired,
            "purged_files": len(purged),
            "protected_snapshots": {str(sid): [{"tag": t, "realization_state": states.get(t)} for t in tags] for sid, tags in sorted(still.items())},
            "note": (
                "files only expired snapshots referenced are deleted now; "
                "protected snapshots are released when the realizations pinning them are REDACTED or expire"
            ),
        }

    def _tag_states(self, table: str) -> dict[str, str]:
        """Tag on ``table`` -> the current state of the published realization whose manifest pins it."""
        out: dict[str, str] = {}
        for manifest_hash, _dataset, _version, state in self.registry.privacy.published_manifests():
            manifest = Manifest.from_json(self.registry.get_manifest(manifest_hash))
            for pin in manifest.sources:
                if pin.table == table and pin.tag is not None:
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
                if outcome["outcome"] == Outcome.CRYPTO_ERASED.value and K(outcome["kind"]) is K.RAW_BATCH and self.zone is not None:
                    self._delete_raw(outcome["id"], int(outcome["generation"]), f"reconciled: privacy deletion {outcome['request_id']}")
                    report.reapplied.append(outcome)
                elif outcome["outcome"] == Outcome.CRYPTO_ERASED.value:
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

    def exclusion_filter(self, columns: Sequence[str] | None = None) -> Callable[[pa.Table], pa.Table]:
        """A Publisher ``row_filter`` that drops rows of every deleted subject (new realizations exclude them).

        ``columns`` are the subject columns to check (default: every configured source's entity).
        """
        deleted = self.registry.privacy.deleted_subjects()
        salt = self.keys.salt()
        subjects = tuple(columns) if columns is not None else entity_columns(self.config)

        def keep(table: pa.Table) -> pa.Table:
            present = [c for c in subjects if c in table.schema.names]
            if not present or not deleted:
                return table
            mask = [True] * table.num_rows
            for column in present:
                mask = [m and (h is None or h not in deleted) for m, h in zip(mask, subject_hashes(table.column(column), salt), strict=True)]
            return table.filter(pa.array(mask, type=pa.bool_()))

        return keep


__all__ = ["DeletionReport", "PrivacyCoordinator", "PrivacyPlanStaleError", "ReconcileReport", "build_coordinator", "subject_column", "subject_hashes"]


def build_coordinator(platform: Platform, *, actor: str | None = None) -> PrivacyCoordinator:
    """The coordinator over everything a subject can be in: realizations, raw landing and canonical tables."""
    return PrivacyCoordinator(
        platform.registry,
        platform.store,
        actor=actor or platform.actor,
        zone=platform.landing,
        tables=platform.tables,
        config=platform.config,
        gate=gatekeeper(platform),
    )
