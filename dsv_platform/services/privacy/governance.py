"""Model governance after a privacy deletion: one obligation per model run trained on a realization the deletion redacted.

A deletion opens them (before its request completes) with each family's policy (core/config/model_governance.py);
``close`` records who decided and the evidence: for the retrain policies a complete run of the same family whose
training realization is readable, was begun at or after the deletion's redaction generation, and which the
subject index scanned for a subject column without finding the subject; for ``stop_serving`` a decision that
the model is no longer served. Anything else is refused (GovernanceEvidenceError), nothing recorded.
Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.artifacts import COMPLETE, MODEL_RUN, RunRecords
from dsv_platform.adapters.registry.governance import GovernanceRecords, Obligation, ObligationClosedError
from dsv_platform.adapters.registry.privacy import PrivacyRequest
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.model_governance import CLOSED_BY, Evidence, ModelGovernance, ModelPolicy, obligation_state
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.errors import DsvError, NotFoundError
from dsv_platform.core.publication.states import READABLE
from dsv_platform.core.reproduction.model_run import model_of
from dsv_platform.core.trust.trust import Role

if TYPE_CHECKING:
    from dsv_platform.services.privacy.privacy import PrivacyCoordinator
    from dsv_platform.services.trust.trust import Gatekeeper

class GovernanceEvidenceError(DsvError):
    """Closing a model obligation without valid evidence: refused, nothing recorded."""


def planned_obligations(registry: Registry, config: PlatformConfig | None, realizations: Iterable[str]) -> list[dict[str, Any]]:
    """One row per model run trained on ``realizations``, with its family's policy (no configuration: the fail-closed default)."""
    governance = config.options.model_governance if config is not None else ModelGovernance()
    rows = []
    for run in GovernanceRecords(registry).trained_runs(realizations):
        policy, source = governance.policy_for(run.family)
        rows.append({"model_run": run.run_hash, "family": run.family, "realization": run.realization,
                     "policy": policy.policy.value, "grace_days": policy.grace_days, "policy_source": source})  # fmt: skip
    return rows


def open_obligations(
    registry: Registry, config: PlatformConfig | None, request: PrivacyRequest, realizations: Iterable[str], *, actor: str
) -> list[Obligation]:
    """Open the request's obligations (idempotent: a rerun opens none twice); every obligation of the request."""
    return GovernanceRecords(registry).open(request.request_id, planned_obligations(registry, config, realizations), actor=actor)


def audit_opened(gate: Gatekeeper, obligations: Sequence[Obligation]) -> None:
    for o in obligations:
        detail = {"request_id": o.request_id, "family": o.family, "policy": o.policy, "policy_source": o.policy_source,
                  "trained_on": o.realization, "due_at": None if o.due_at is None else o.due_at.isoformat()}  # fmt: skip
        gate.audit("privacy.model_obligation.open", f"model_run:{o.model_run}", detail=detail)


def obligation_documents(registry: Registry, request_ids: Iterable[str]) -> list[dict[str, Any]]:
    """Every obligation of these requests as ``dsv privacy status`` shows it: its state (open, overdue, closed) and what closes it."""
    records = GovernanceRecords(registry)
    now = records.now()
    docs = []
    for o in records.obligations(request_ids):
        state = obligation_state(closed=o.decision is not None, due_at=o.due_at, now=now)
        docs.append({**o.to_document(), "state": state, "closed_by": CLOSED_BY[ModelPolicy(o.policy)].value})
    return docs


def _obligation(records: GovernanceRecords, requests: Sequence[PrivacyRequest], model: str) -> Obligation:
    """The one obligation of ``requests`` whose model run ``model`` names (its run manifest hash, or a unique prefix)."""
    text = model.strip().lower().removeprefix("model_run:")
    found = [o for o in records.obligations(r.request_id for r in requests) if o.model_run.startswith(text)]
    if not text or not found:
        known = ", ".join(sorted({o.model_run[:16] for o in records.obligations(r.request_id for r in requests)})) or "none"
        raise NotFoundError(f"no model obligation for model run {model!r} in request(s) {[r.request_id for r in requests]}; obligations: {known}", ref=model)
    if len(found) > 1:
        raise NotFoundError(f"model run {model!r} names {len(found)} obligations ({', '.join(o.model_run[:16] for o in found)}): give more digits", ref=model)
    return found[0]


def _retrained_run(registry: Registry, obligation: Obligation, retrained: str) -> tuple[str, str, dict[str, Any]]:
    """The retrained run's hash, its family and its run manifest, checked: complete, another run, the same family."""
    text = retrained.strip().lower().removeprefix("model_run:")
    runs = [r for r in RunRecords(registry).runs(kind=MODEL_RUN, hash_prefix=text) if r.state == COMPLETE and r.manifest is not None] if text else []
    hashes = sorted({str(r.manifest_hash) for r in runs})
    if len(hashes) != 1:
        what = "no complete model run" if not hashes else f"{len(hashes)} complete model runs"
        raise GovernanceEvidenceError(f"{what} with run manifest hash {retrained!r}: name the retrained model's run (`dsv lineage model_run:<hash>`)")
    run = runs[0]
    assert run.manifest is not None
    family = model_of(run.manifest)
    if hashes[0] == obligation.model_run:
        raise GovernanceEvidenceError(f"model run {hashes[0][:16]} is the affected model itself, not a retrain of it")
    if obligation.family is None:
        raise GovernanceEvidenceError(f"the family of model run {obligation.model_run[:16]} is not recorded: no retrain can be checked against it")
    if family != obligation.family:
        raise GovernanceEvidenceError(f"model run {hashes[0][:16]} is of family {family!r}, the affected model of {obligation.family!r}: retrain that family")
    return hashes[0], family, dict(run.manifest)


def retrain_evidence(coordinator: PrivacyCoordinator, obligation: Obligation, request: PrivacyRequest, retrained: str) -> dict[str, Any]:
    """The evidence that ``retrained`` closes ``obligation`` (a retrain on a realization without the subject), or GovernanceEvidenceError."""
    registry = coordinator.registry
    run_hash, family, doc = _retrained_run(registry, obligation, retrained)
    trained_on = str((doc.get("realization") or {}).get("manifest_hash") or "")
    realization = registry.find_by_manifest_hash(trained_on) if trained_on else None
    where = f"model run {run_hash[:16]} was trained on realization {trained_on[:16] or '(none recorded)'}"
    if realization is None or realization.state not in READABLE:
        state = "unknown to the registry" if realization is None else realization.state.value
        raise GovernanceEvidenceError(f"{where}, which is {state}: retrain on a readable realization built after the deletion")
    records = GovernanceRecords(registry)
    built_at = records.built_at_generation(realization.created_at)
    if built_at < request.generation:
        raise GovernanceEvidenceError(
            f"{where} ({realization.ref}), begun at redaction generation {built_at}, before deletion {request.request_id} "
            f"(generation {request.generation}): rebuild the dataset (`dsv build`), retrain on the new realization"
        )
    coordinator.refresh_index()  # the subject index scans the new realization now, if it has not yet
    scanned, column = records.scanned_subject_column(trained_on)
    if not scanned or column is None:
        raise GovernanceEvidenceError(f"{where}, in which the subject index found no subject column: the platform cannot check it excludes the subject")
    if records.holds_subject(trained_on, request.subject_key_hash):
        raise GovernanceEvidenceError(f"{where} ({realization.ref}), which still holds the deleted subject: rebuild without it, then retrain")
    return {"retrained_run": run_hash, "family": family, "trained_on": trained_on, "trained_on_ref": realization.ref,
            "built_at_generation": built_at, "request_generation": request.generation, "subject_column": column,
            "subject_in_training_data": False}  # fmt: skip


def close_obligation(
    coordinator: PrivacyCoordinator, requests: Sequence[PrivacyRequest], model: str, *, retrained: str | None, not_served: bool, reason: str | None
) -> dict[str, Any]:
    """Close the obligation of ``model`` in ``requests`` on evidence (see the module docstring); its document as status shows it."""
    if coordinator.gate is not None:
        coordinator.gate.require(Role.PRIVACY_OFFICER)
    if (retrained is None) == (not not_served):
        raise GovernanceEvidenceError("give exactly one piece of evidence: --retrained-by <run manifest hash> or --not-served")
    registry = coordinator.registry
    records = GovernanceRecords(registry)
    obligation = _obligation(records, requests, model)
    if obligation.decision is not None:
        d = obligation.decision
        raise ObligationClosedError(f"model obligation #{obligation.id} ({obligation.model_run[:16]}) was closed by {d['decided_by']} at {d['decided_at']}")
    policy = ModelPolicy(obligation.policy)
    given = Evidence.RETRAINED if retrained is not None else Evidence.NOT_SERVED
    if given is not CLOSED_BY[policy]:
        flag = "--retrained-by <run manifest hash>" if CLOSED_BY[policy] is Evidence.RETRAINED else "--not-served"
        raise GovernanceEvidenceError(f"model obligation #{obligation.id} is under policy {policy.value}: it is closed by {flag}, not by {given.value}")
    request = next(r for r in requests if r.request_id == obligation.request_id)
    detail = retrain_evidence(coordinator, obligation, request, retrained) if retrained is not None else {"not_served": True}
    run = str(detail["retrained_run"]) if retrained is not None else None
    records.decide(obligation.id, evidence=given.value, retrained_run=run, detail=detail, actor=coordinator.actor, reason=reason)
    if coordinator.gate is not None:
        audited = {"request_id": obligation.request_id, "policy": policy.value, "evidence": given.value, **detail}
        coordinator.gate.audit("privacy.model_obligation.close", f"model_run:{obligation.model_run}", reason=reason, detail=audited)
    return next(d for d in obligation_documents(registry, [obligation.request_id]) if d["obligation_id"] == obligation.id)


__all__ = ["GovernanceEvidenceError", "audit_opened", "close_obligation", "obligation_documents", "open_obligations", "planned_obligations"]
