"""Privacy deletion: the subject index built from data, and the idempotent deletion coordinator.

Plan, then guarded apply (destructive operations: a plan first, then a guarded apply): ``refresh_index``, ``plan``,
``apply``. A crash anywhere leaves every read refused until a rerun or ``reconcile`` finishes
the work; erasing, deleting and redacting are idempotent; one deletion runs at a time.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.engine.duckdb_engine import sweep_stale
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.registry.privacy import PrivacyIncompleteError, PrivacyRequest
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
from dsv_platform.services.privacy.governance import audit_opened, obligation_documents, open_obligations, planned_obligations
from dsv_platform.services.privacy.privacy_canonical import delete_canonical, find_subject_key, record_deletion_lineage
from dsv_platform.services.privacy.privacy_index import SubjectIndexing, subject_column, subject_hashes
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform.services.privacy.privacy_restore import CanonicalReconcileError, ReconcileReport, reapply_canonical
from dsv_platform.services.privacy.privacy_sweep import sweep_staging
from dsv_platform.services.trust.trust import Gatekeeper, gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

K = DescendantKind


class PrivacyPlanStaleError(DsvError):
    """The plan was computed at another redaction generation: plan again."""


def _merged(recorded: Sequence[Decision], fresh: Sequence[Decision]) -> list[Decision]:
    """The plan recorded with the request, plus what a fresh plan found besides (a rerun never does less than the first run planned)."""
    seen = {d.descendant.sort_key for d in recorded}
    return [*recorded, *(d for d in fresh if d.descendant.sort_key not in seen)]


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
    obligations: list[dict[str, Any]] = field(default_factory=list)  # one per model run trained on a redacted realization

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
            "model_obligations": self.obligations,
            "staged_parts": self.staging,
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
        subject_key: bytes | None = None,
    ) -> None:
        """``config`` names the subject columns (the sources' entities); without it nothing is indexed as a subject.

        With ``gate``, planning and applying a deletion need the privacy_officer role, and each applied request is audited
        under the subject's hash (never the subject's key). ``subject_key`` keys every subject hash (privacy_key.py);
        without it hashes are salted only, and a registry whose hashes are keyed is refused.
        """
        self.subject_key = subject_key
        self._key_checked = False
        self.gate = gate
        self.registry = registry
        self.config = config
        self.store = store
        self.keys = store.keys
        self.actor = actor if gate is None else gate.identity  # with a gate: the identity that proved its key, never free text
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
        self._reconcile_generations()
        request, created = self.registry.privacy.begin_request(rid, plan.subject_key_hash, reason=plan.reason, actor=self.actor, decisions=plan.decisions)
        staging = self._finish(request, _merged(self.registry.privacy.planned(rid), plan.decisions), self._subject_keys.get(plan.subject_key_hash))
        return DeletionReport(
            request_id=rid,
            subject_key_hash=plan.subject_key_hash,
            generation=request.generation,
            created=created,
            plan=plan,
            outcomes=self.registry.privacy.outcomes(request_id=rid),
            models=self.registry.privacy.models_using(plan.affected_realizations),
            staging=staging,
            obligations=obligation_documents(self.registry, [rid]),
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
        obligations = planned_obligations(self.registry, self.config, plan.affected_realizations)  # what applying would open
        return DeletionReport(rid, plan.subject_key_hash, plan.based_on_generation, False, plan, preview, models, applied=False, obligations=obligations)

    def _finish(self, request: PrivacyRequest, decisions: Sequence[Decision], subject_key: str | None) -> list[dict[str, Any]]:
        """Carry out every decision (idempotent), sweep staging, complete the request (refused while an outcome is missing)."""
        # objects and raw batches first, then realizations (REDACTED), then canonical rows (whose snapshots those realizations pinned)
        order = {K.REALIZATION: 1, K.CANONICAL_ROWS: 2}
        self.keys.record_deletion(request.generation, request.request_id, request.subject_key_hash)  # outlives a restored registry
        for decision in sorted(decisions, key=lambda d: order.get(d.descendant.kind, 0)):
            detail = self._carry_out(decision, request, request.subject_key_hash)
            self.registry.privacy.record_outcome(request, decision, detail)
        if subject_key is None and self.store.list_staging():
            subject_key = self._subject_keys.get(request.subject_key_hash)
        keep = {d.descendant.id for d in decisions if d.outcome is Outcome.RETAINED}
        staging = self._sweep_staging(request, subject_key, keep)
        redacted = {d.descendant.id for d in decisions if d.descendant.kind is K.REALIZATION and d.outcome is not Outcome.RETAINED}
        opened = open_obligations(self.registry, self.config, request, redacted, actor=self.actor)  # governance.py; before completion
        if self.registry.privacy.complete_request(request.request_id) and self.gate is not None:  # this call completed it: audited once
            audited = {"request_id": request.request_id, "generation": request.generation, "model_obligations": len(opened)}
            audit_opened(self.gate, opened)  # before privacy.delete, whose checkpoint then covers them
            self.gate.audit("privacy.delete", f"subject:{request.subject_key_hash}", reason=request.reason, detail=audited)
        self._advance_watermark()
        return staging

    def _advance_watermark(self) -> None:
        """The key store's generation up to the registry's, never past an incomplete request (reads stay refused until it is finished)."""
        pending = [r.generation - 1 for r in self.registry.privacy.requests() if not r.completed]
        target = min([self.registry.redaction_generation(), *pending])
        if target > self.keys.generation():
            self.keys.set_generation(target)

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

    def _sweep_staging(self, request: PrivacyRequest, subject_key: str | None, keep: set[str]) -> list[dict[str, Any]]:
        """Staged parts of killed or failed builds holding the subject: keys erased, parts removed (privacy_sweep.py)."""
        if not self.store.list_staging():
            return []
        if subject_key is None:  # the key is never stored: without it the staged parts cannot be checked (fail closed)
            raise PrivacyIncompleteError(
                f"privacy request {request.request_id}: staged parts must be swept and the subject's key is not known here; "
                f"rerun `dsv privacy delete --subject <key> --request-id {request.request_id}`"
            )
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
        """The key of ``subject``: remembered from ``plan`` in this process, else found by hashing the column's values in the table's snapshots."""
        if subject in self._subject_keys:
            return self._subject_keys[subject]
        assert self.tables is not None
        salt, hash_key = self.keys.salt(), self.hash_key()
        key = find_subject_key(self.tables, spec, column, lambda v: subject_key_hash(salt, v, hash_key) == subject)
        if key is not None:
            self._subject_keys[subject] = key
        return key

    def _delete_canonical(self, d: Descendant, subject: str) -> dict[str, Any]:
        """The canonical stage (privacy_canonical.py); idempotent, so a rerun after a kill in it finishes it."""
        if self.tables is None:
            raise DsvError("a canonical rows deletion needs the canonical tables: build the PrivacyCoordinator with tables=")
        spec = next(s for s in self.subject_specs() if self.tables.identifier(s) == d.id)
        column = spec.entity
        assert column is not None
        key = self._subject_key_for(spec, column, subject)
        if key is None:
            return {"table": d.id, "rows": 0, "note": "no snapshot of the table holds the subject"}
        return record_deletion_lineage(self.registry, delete_canonical(self.tables, spec, key, self._tag_states(spec.name)), actor=self.actor)

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
        """Finish what a kill or a restored backup left undone: the generations (:meth:`_reconcile_generations`), then every incomplete request.

        A request is finished from the plan recorded with it; one that cannot be finished here (a plan never
        recorded, staged parts to sweep without the subject's key) stops the reconcile naming it (fail closed).
        Then every completed deletion's subject is re-deleted from a canonical table a restored backup brought it back to.
        """
        report = self._reconcile_generations()
        stuck: list[str] = []
        for request in [r for r in self.registry.privacy.requests() if not r.completed]:
            decisions = self.registry.privacy.planned(request.request_id)
            if not decisions:
                rerun = f"dsv privacy delete --subject <key> --request-id {request.request_id}"
                stuck.append(f"privacy request {request.request_id} has no recorded plan: rerun `{rerun}`")
                continue
            if self.gate is not None:
                self.gate.require(Role.PRIVACY_OFFICER)
            try:
                report.staging.extend(self._finish(request, decisions, None))
            except PrivacyIncompleteError as exc:
                stuck.append(str(exc))
                continue
            report.finished.append(request.request_id)
        if stuck:
            raise PrivacyIncompleteError("; ".join(stuck))
        reapply_canonical(self, report)  # a restored warehouse: completed deletions' rows back in a current snapshot (privacy_restore.py)
        return report

    def _reconcile_generations(self) -> ReconcileReport:
        """Bring the key store and the registry to the same redaction generation after a restored backup.

        Key store behind (an old key/object store backup): re-apply every
        recorded erasure and deletion newer than its watermark, then advance it
        (never past an incomplete request: reads stay refused until it is finished).
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
            self._advance_watermark()
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

    # status and the exclusion filter: privacy_index.py


__all__ = ["CanonicalReconcileError", "DeletionReport", "PrivacyCoordinator", "PrivacyIncompleteError",
           "PrivacyPlanStaleError", "ReconcileReport", "build_coordinator",
           "subject_column", "subject_hashes"]  # fmt: skip


def build_coordinator(platform: Platform, *, actor: str | None = None) -> PrivacyCoordinator:
    """The coordinator over everything a subject can be in: realizations, raw landing and canonical tables."""
    sweep_stale(platform.settings.spill_dir)  # a killed build's engine folder holds example rows, subjects included
    return PrivacyCoordinator(
        platform.registry,
        platform.store,
        actor=platform.actor,  # the proven identity; ``actor`` is kept for callers, never recorded (docs/trust.md)
        zone=platform.landing,
        tables=platform.tables,
        config=platform.config,
        gate=gatekeeper(platform),
        subject_key=load_subject_key(platform.settings.subject_key_path),
    )
