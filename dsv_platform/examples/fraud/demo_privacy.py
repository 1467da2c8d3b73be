"""The demo's privacy story: an account in the training set is deleted; a retrain closes the obligation it opens.

``dsv privacy delete`` REDACTS every realization holding the account and opens one obligation per model trained on
one (``model_governance`` in the example's platform.yaml: ``fraud_model: retrain_required``), open in ``dsv privacy
status``. The training set is rebuilt through the Dagster runs, the model retrained, each obligation closed with
``--retrained-by RUN`` and the retrain released. The superseded models (trained on REDACTED data: never
reconstructable) have their ``model_version`` roots released (audited), so ``dsv rehearse`` reconstructs every model
still retained. On a reused home each step says what is already so and goes on.
Details: docs/gc-and-privacy.md, section Models trained on deleted data"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from dsv_platform.adapters.registry.governance import ObligationClosedError
from dsv_platform.bootstrap import Platform
from dsv_platform.core.lineage.lineage import NodeKind, parse_node
from dsv_platform.examples.fraud.demo_release import MODEL, release
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.privacy.governance import close_obligation
from dsv_platform.services.privacy.privacy import PrivacyCoordinator, build_coordinator
from dsv_platform.services.reproduction.model_registry import records
from dsv_platform.services.retention.roots import release_root

REASON = "GDPR art. 17 request #2026-117"
CURRENCIES = ("USD", "EUR", "GBP", "CAD")  # fraud_training_set's population filter


def subject_in_training_set(domain: FraudDomain, day: dt.date) -> str:
    """An account with a transaction on ``day`` that the training set keeps (not a test account, an accepted currency)."""
    rows = domain.transactions(day).select(["account_id", "currency"]).to_pylist()
    return min(str(r["account_id"]) for r in rows if r["currency"] in CURRENCIES and not str(r["account_id"]).startswith("test_"))


def _obligation_line(o: Mapping[str, Any], served: set[str]) -> str:
    where = " (served on fraud-scoring)" if o["model_run"] in served else ""
    line = f"    {o['state'].upper():7} {MODEL}@sha256:{o['model_run'][:12]}…{where}: {o['policy']}"
    d = o["decision"]
    return line if d is None else f"{line}; retrained as {str(d['retrained_run'])[:12]}…, decided by {d['decided_by']}"


def _status(coordinator: PrivacyCoordinator, platform: Platform, subject: str, *, only_served: bool = False) -> list[dict[str, Any]]:
    """``dsv privacy status``: every obligation, or (``only_served``) those of models that served, the others counted."""
    doc = coordinator.status(subject)
    obligations: list[dict[str, Any]] = doc["model_obligations"]
    served = {d.run_hash for d in records(platform).deployments()}
    counts = ", ".join(f"{sum(o['state'] == s for o in obligations)} {s}" for s in ("open", "overdue", "closed"))
    policies = ", ".join(sorted({f"{o['policy']} ({o['policy_source']})" for o in obligations}))
    print(f"  dsv privacy status --subject {subject}: {'deleted' if doc['deleted'] else 'not deleted'}; model obligations: {counts}; policy {policies}")
    shown = [o for o in obligations if o["model_run"] in served or not only_served]
    for o in shown:
        print(_obligation_line(o, served))
    if len(shown) < len(obligations):
        print(f"    ... and {len(obligations) - len(shown)} more, of the superseded runs that never served, in the same state")
    return obligations


def _delete(coordinator: PrivacyCoordinator, subject: str) -> None:
    known = coordinator.status(subject)["requests"]
    if known:
        r = known[0]
        print(f"  already deleted on this home: request {r['request_id']} at redaction generation {r['generation']}")
        return
    report = coordinator.delete(subject, REASON)
    doc = report.to_document()
    counts: dict[str, int] = {}
    for o in doc["outcomes"]:
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    outcomes = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"  dsv privacy delete --subject {subject}: request {report.request_id} at redaction generation {report.generation}: {outcomes}")
    print(f"  {len(doc['affected_realizations'])} realization(s) REDACTED; {len(report.obligations)} model obligation(s) opened")


def _close(coordinator: PrivacyCoordinator, subject: str, obligations: list[dict[str, Any]], retrained: str) -> None:
    requests = coordinator.registry.privacy.requests(coordinator.subject_hash(subject))
    closed = already = 0
    for o in obligations:
        try:
            close_obligation(coordinator, requests, o["model_run"], retrained=retrained, not_served=False, reason=f"retrained without the subject ({REASON})")
            closed += 1
        except ObligationClosedError:
            already += 1
    again = f"; {already} already closed" if already else ""
    print(f"  dsv privacy close --subject {subject} --model RUN --retrained-by {retrained[:12]}…: closed {closed}{again}")


def _retire(platform: Platform, obligations: list[dict[str, Any]], retrained: str) -> None:
    """Release the ``model_version`` roots of the superseded models (trained on now REDACTED data); never one an alias or a deployment serves."""
    reg = records(platform)
    pointed = {a.run_hash for a in reg.aliases()} | {d.run_hash for d in reg.deployments(current_only=True)}
    superseded = {o["model_run"] for o in obligations if o["model_run"] != retrained and o["model_run"] not in pointed}
    roots = [r for r in platform.registry.list_retention_roots(dt.datetime.now(dt.UTC), kind="model_version") if _run_of(r.ref) in superseded]
    for root in roots:
        release_root(platform, root.id, reason=f"superseded by {MODEL}@sha256:{retrained[:12]}: trained on data REDACTED by {REASON}")
    kept = "none was retained any more" if not roots else f"released {len(roots)} model_version retention root(s)"
    print(f"  retired the {len(superseded)} superseded model(s) trained on REDACTED realizations: {kept} (dsv retention release ID --reason TEXT)")


def _run_of(ref: str) -> str | None:
    node = parse_node(ref)
    return node[1] if node is not None and node[0] == NodeKind.MODEL_RUN.value else None


def play(platform: Platform, domain: FraudDomain, day: dt.date, publish: Callable[[], dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Delete an account of ``day``, rebuild and retrain through ``publish`` (the Dagster runs), close, release, retire; the retrain's publish."""
    subject = subject_in_training_set(domain, day)
    coordinator = build_coordinator(platform)
    print(f"\n== privacy deletion: account {subject} asks for erasure ({REASON}); it is in every training set so far")
    _delete(coordinator, subject)
    obligations = _status(coordinator, platform, subject)
    retrain = publish()
    model = retrain["models/fraud_model"]  # the model asset's key
    run = str(model["run_manifest_hash"])
    print(f"  rebuilt without it: fraud_training_set:v6 -> {model['ref']}\n  retrained {MODEL} on it: run {run[:12]}…")
    _close(coordinator, subject, obligations, run)
    obligations = _status(coordinator, platform, subject, only_served=True)
    release(platform, model, why=f"the retrain without {subject}")
    _retire(platform, obligations, run)
    return retrain
