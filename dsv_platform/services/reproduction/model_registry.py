"""The model registry's use cases: find a model version, approve or revoke it, move a model alias, list models.

A model version is a complete model run (its run manifest hash), registered when training completes
(model_run.py) or, for runs recorded before the registry, the first time a command names it. Approval,
revocation and alias moves follow the datasets' rules and trust checks: approver for approvals, publisher
for alias moves, scoped by the model name; the actor is always the proven identity (docs/trust.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.artifacts import COMPLETE, MODEL_RUN, RunRecord, RunRecords
from dsv_platform.adapters.registry.models import ModelRecords
from dsv_platform.core.errors import ConfigurationError, NotFoundError
from dsv_platform.core.publication.approval import check_reason
from dsv_platform.core.reproduction.model_registry import MIN_PREFIX, MODEL_REF_FORMS, ModelAlias, ModelVersion, parse_model_alias, parse_model_ref
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def records(platform: Platform) -> ModelRecords:
    return ModelRecords.of(platform.registry)


def register_run(platform: Platform, run: RunRecord) -> ModelVersion:
    """The model version of a COMPLETE model run (registered now if it was not yet; idempotent)."""
    if run.kind != MODEL_RUN or run.state != COMPLETE or not run.manifest_hash or run.manifest is None:
        raise NotFoundError(f"model run #{run.id} ({run.name}) is {run.state}, not a complete model run: it is no model version", ref=run.name)
    trained_on = str((run.manifest.get("realization") or {}).get("ref") or "")
    model = str(run.manifest.get("model") or run.name)
    version, _ = records(platform).register(model, run.manifest_hash, trained_on=trained_on, trained_by=run.actor, actor=platform.actor)
    return version


def _by_hash(platform: Platform, digest: str, text: str) -> ModelVersion:
    """The version whose run hash is ``digest`` or starts with it (unique), registering a complete run recorded before the registry."""
    found = {v.run_hash: v for v in records(platform).versions(prefix=digest)}
    runs = [r for r in RunRecords(platform.registry).runs(kind=MODEL_RUN, hash_prefix=digest) if r.state == COMPLETE and r.manifest_hash]
    hashes = sorted(set(found) | {str(r.manifest_hash) for r in runs})
    if len(hashes) > 1:
        raise NotFoundError(f"model reference {text!r} is ambiguous: {len(hashes)} model versions start with {digest}; give more digits", ref=text)
    if not hashes:
        raise NotFoundError(f"no model version {text!r}: no complete model run has a run manifest hash starting {digest} (dsv model list)", ref=text)
    if hashes[0] in found:
        return found[hashes[0]]
    return register_run(platform, next(r for r in runs if r.manifest_hash == hashes[0]))


def find_version(platform: Platform, text: str) -> ModelVersion:
    """The model version ``text`` names (forms: :data:`MODEL_REF_FORMS`), or NotFoundError naming it."""
    ref = parse_model_ref(text)
    if ref.alias is not None and ref.name is not None:
        alias = records(platform).get_alias(ref.name, ref.alias)
        if alias is None:
            raise NotFoundError(f"no model alias {ref.name}@{ref.alias} (dsv model alias set {ref.name}@{ref.alias} MODEL_REF)", ref=text)
        return _by_hash(platform, alias.run_hash, text)
    digest = ref.run_hash or ""
    if len(digest) < MIN_PREFIX:
        raise NotFoundError(f"model reference {text!r}: forms {MODEL_REF_FORMS}", ref=text)
    version = _by_hash(platform, digest, text)
    if ref.name is not None and version.model != ref.name:
        raise NotFoundError(f"model reference {text!r}: run {version.run_hash} is a version of {version.model}, not {ref.name}", ref=text)
    return version


@dataclass(frozen=True)
class ModelApproval:
    action: str
    version: ModelVersion
    changed: bool
    actor: str
    reason: str
    protected_aliases: tuple[str, ...] = ()

    def to_document(self) -> dict[str, Any]:
        doc = {"action": self.action, "changed": self.changed, "actor": self.actor, "reason": self.reason}
        return {**self.version.to_document(), **doc, "protected_aliases": list(self.protected_aliases)}


def approve_model(platform: Platform, text: str, *, reason: str) -> ModelApproval:
    """PUBLISHED -> ELIGIBLE by an approver who did not train it, with a reason; audited (``model.approve``)."""
    why = check_reason(reason, command="dsv model approve")
    version = find_version(platform, text)
    gate = gatekeeper(platform)
    gate.require(Role.APPROVER, definition=version.model)
    updated, changed = records(platform).approve(version.run_hash, reason=why, actor=gate.identity, audit_as=gate.identity)
    return ModelApproval("approve", updated, changed, gate.identity, why)


def revoke_model(platform: Platform, text: str, *, reason: str, force: bool = False) -> ModelApproval:
    """ELIGIBLE -> PUBLISHED; refused while a protected model alias points at it, unless ``force``; audited (``model.revoke``)."""
    why = check_reason(reason, command="dsv model revoke")
    version = find_version(platform, text)
    gate = gatekeeper(platform)
    gate.require(Role.APPROVER, definition=version.model)
    updated, changed, pointing = records(platform).revoke(version.run_hash, reason=why, actor=gate.identity, force=force, audit_as=gate.identity)
    return ModelApproval("revoke", updated, changed, gate.identity, why, tuple(pointing))


def _expected(platform: Platform, expect: str | None) -> str | None:
    """``--expect OLD``: the version the alias must point at now, by run hash (an alias would always match itself: refused)."""
    if expect is None:
        return None
    if parse_model_ref(expect).alias is not None:
        raise ConfigurationError(f"--expect {expect!r}: name the version the alias points at now by its run hash (NAME@sha256:<hash> or <hash>), not an alias")
    return find_version(platform, expect).run_hash


def set_model_alias(platform: Platform, alias_text: str, model_ref: str, *, expect: str | None = None, reason: str = "") -> ModelAlias:
    """Point ``NAME@ALIAS`` at the version ``model_ref`` names, by compare-and-swap (``expect`` None: create); audited (``model.alias.move``)."""
    name, alias = parse_model_alias(alias_text)
    version = find_version(platform, model_ref)
    gate = gatekeeper(platform)
    gate.require(Role.PUBLISHER, definition=name)  # moving a name is publishing, as for dataset aliases
    old = _expected(platform, expect)
    return records(platform).set_alias(name, alias, version.run_hash, expect=old, actor=gate.identity, reason=reason, audit_as=gate.identity)


def model_alias_history(platform: Platform, alias_text: str) -> list[dict[str, Any]]:
    name, alias = parse_model_alias(alias_text)
    return [m.to_document() for m in records(platform).alias_history(name, alias)]


def list_models(platform: Platform, *, model: str | None = None) -> list[dict[str, Any]]:
    """Every model version (registered, or a complete run not named by any command yet), newest first, with its aliases and deployments."""
    reg = records(platform)
    versions = [v.to_document() | {"registered": True} for v in reg.versions(model=model)]
    known = {v["run_hash"] for v in versions}
    for run in RunRecords(platform.registry).complete_runs(MODEL_RUN):
        doc = run.manifest or {}
        name = str(doc.get("model") or run.name)
        if run.manifest_hash and run.manifest_hash not in known and (model is None or name == model):
            trained_on = str((doc.get("realization") or {}).get("ref") or "")
            at = run.finished_at or run.started_at
            versions.append({"model": name, "run_hash": run.manifest_hash, "ref": f"{name}@sha256:{run.manifest_hash}",
                             "node": f"model_run:{run.manifest_hash}", "state": "PUBLISHED", "trained_on": trained_on,
                             "trained_by": run.actor, "registered_at": at.isoformat(), "registered": False})  # fmt: skip
            known.add(run.manifest_hash)
    aliases: dict[str, list[str]] = {}
    for a in reg.aliases(model=model):
        aliases.setdefault(a.run_hash, []).append(a.alias)
    deployed: dict[str, list[dict[str, Any]]] = {}
    for d in reg.deployments(run_hashes=known):
        deployed.setdefault(d.run_hash, []).append(d.to_document())
    for v in versions:
        v["aliases"] = aliases.get(v["run_hash"], [])
        v["deployments"] = deployed.get(v["run_hash"], [])
    versions.sort(key=lambda v: str(v["registered_at"]), reverse=True)
    return sorted(versions, key=lambda v: str(v["model"]))  # by model, each model's newest first
