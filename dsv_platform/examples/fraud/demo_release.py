"""The demo's release and incident walk: a trained model reaches a deployment, and a bad raw batch's impact reaches it.

``release`` approves the model's training realization (as ``reviewer``, who may not build it) and promotes the
model (the training set's ``production`` alias), then registers and approves the model version, moves
``fraud_model@production`` by compare-and-swap and records the deployment on ``fraud-scoring`` (the services of
``dsv approve``, ``dsv promote``, ``dsv model approve``, ``dsv model alias set`` and ``dsv deploy record``).
Each step is idempotent on a reused home: what is already so is said, not done twice. ``incident_walk`` is
``dsv lineage --impact raw_batch:<id>@<digest>``: the datasets, models and deployments a raw batch reached.
Details: docs/lineage-and-reproduction.md, "Incident walk"
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.services.lineage.lineage import lineage
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.reproduction.deployments import deployments, record_deployment
from dsv_platform.services.reproduction.model_registry import approve_model, records, set_model_alias
from dsv_platform.services.reproduction.promotion import promote
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.trust import gatekeeper

APPROVAL_REASON = "demo: gates passed, old realizations re-verified after every failure mode"
REVIEWER = "reviewer"
"""The demo's approver: holds no builder grant, so it may approve what the Dagster runs built (docs/trust.md)."""
MODEL, ALIAS, TARGET = "fraud_model", "production", "fraud-scoring"


def short(ref: str, digits: int = 12) -> str:
    """``NAME@sha256:<hash>`` with the hash cut to ``digits`` (any other text unchanged)."""
    name, sep, digest = ref.partition("@sha256:")
    return f"{name}@sha256:{digest[:digits]}…" if sep else ref


def reviewer(platform: Platform) -> Platform:
    """The demo's ``reviewer``: approver only. Its Dagster runs carry no launch request, so no identity that may build approves them."""
    operator = trust.current_identity(platform).name
    trust.create_identity(platform, REVIEWER, by=operator)
    trust.change_grant(platform, Grant(REVIEWER, Role.APPROVER), add=True, reason="the demo's reviewer: approves, never builds")
    return build_platform(replace(platform.settings, identity=REVIEWER))


def release(platform: Platform, model: Mapping[str, Any], *, why: str) -> None:
    """Approve and promote the model's training realization (``production`` moves only to ELIGIBLE), then deploy the model."""
    with reviewer(platform) as r:
        approval = approve(r.registry, str(model["ref"]), reason=APPROVAL_REASON, actor=r.actor, gate=gatekeeper(r))
    print(f"\n== release: {why}\napproval\n  {approval.realization.ref}: {approval.realization.state.value}; {approval.note}")
    promoted = promote(platform, str(model["run_manifest_hash"]), actor=platform.actor).to_document()
    print(f"  promoted {promoted['model']} to {promoted['alias_ref']} (a protected alias: it points only at ELIGIBLE realizations)")
    deploy(platform, str(model["run_manifest_hash"]), why=why)


def deploy(platform: Platform, run_hash: str, *, why: str) -> None:
    """The model version approved (by ``reviewer``, who did not train it), ``fraud_model@production`` moved to it, its deployment recorded."""
    ref, why = f"{MODEL}@sha256:{run_hash}", f"demo release: {why}"
    with reviewer(platform) as r:
        approved = approve_model(r, ref, reason=f"{APPROVAL_REASON}; {why}")
    print(f"  model {short(ref)}: {approved.version.state.value}{'' if approved.changed else ' (already)'} (dsv model approve, as reviewer)")
    current = records(platform).get_alias(MODEL, ALIAS)
    if current is not None and current.run_hash == run_hash:
        print(f"  {MODEL}@{ALIAS} already -> {run_hash[:12]}… (generation {current.generation})")
    else:
        old = None if current is None else current.run_hash
        moved = set_model_alias(platform, f"{MODEL}@{ALIAS}", ref, expect=old, reason=why)
        frm = "(created)" if old is None else f"{old[:12]}…"
        print(f"  {MODEL}@{ALIAS}: {frm} -> {run_hash[:12]}… by compare-and-swap (generation {moved.generation}; dsv model alias set --expect)")
    serving = deployments(platform, target=TARGET, current_only=True)
    if serving and serving[0].run_hash == run_hash:
        print(f"  already serving on {TARGET} (deployment #{serving[0].id}, recorded by {serving[0].actor})")
        return
    d = record_deployment(platform, ref, target=TARGET, reason=why)
    print(f"  deployed on {TARGET}: deployment #{d.id} by {d.actor} (dsv deploy record {short(ref)} --target {TARGET})")


def incident_walk(platform: Platform, query: str, what: str) -> dict[str, Any]:
    """Print ``dsv lineage --impact <query>`` as the incident question reads it; the walk's document."""
    doc = lineage(platform, query, impact=True)
    kinds: dict[str, int] = {}
    for n in doc["nodes"]:
        kinds[n["kind"]] = kinds.get(n["kind"], 0) + 1
    print(f"\n== incident walk: dsv lineage --impact {query[:32]}…  ({what})")
    print(f"  reaches {', '.join(f'{c} {k}' for k, c in sorted(kinds.items()))}")
    by_dataset: dict[str, list[str]] = {}
    for n in sorted((n for n in doc["nodes"] if n["kind"] == "realization" and "ref" in n), key=lambda n: n["depth"]):
        name, _, digest = str(n["ref"]).partition("@sha256:")
        by_dataset.setdefault(name, []).append(digest[:12] + ("" if n["state"] == "PUBLISHED" else f" {n['state']}"))
    print(f"  datasets that included it ({sum(map(len, by_dataset.values()))} realizations, PUBLISHED unless said):")
    for name, found in sorted(by_dataset.items()):
        print(f"    {name}@sha256: {', '.join(found)}")
    print(f"  models trained on them ({len(doc['models'])}):")
    for m in doc["models"]:
        aliases = f", {', '.join(m['aliases'])}" if m["aliases"] else ""
        print(f"    {short(m['ref'])} [{m['state'] or 'not registered'}{aliases}]")
    print(f"  deployments that served them ({len(doc['deployments'])}):")
    for d in doc["deployments"]:
        print(f"    {d['target']}: {d['ref']} ({'serving now' if d['current'] else 'replaced since'}; recorded by {d['actor']})")
    return doc
