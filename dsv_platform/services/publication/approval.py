"""Approval and revocation of realizations (``dsv approve``, ``dsv revoke``); docs/publication.md.

``approve`` moves a PUBLISHED realization to ELIGIBLE, ``revoke`` moves it back;
each is one realization event with the actor and the reason. Protected aliases
(``production`` by default) may point only to ELIGIBLE realizations, and a
revocation is refused while one points at the realization, unless ``force``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.approval import check_reason
from dsv_platform.core.publication.records import Realization, RealizationEvent
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust.trust import Role

if TYPE_CHECKING:
    from dsv_platform.services.trust.trust import Gatekeeper


@dataclass(frozen=True)
class ApprovalOutcome:
    """What ``approve`` or ``revoke`` did; ``changed`` is False for a no-op (already in the wanted state), said in ``note``."""

    action: str
    realization: Realization
    changed: bool
    actor: str
    reason: str
    note: str
    protected_aliases: tuple[str, ...] = ()

    def to_document(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "ref": self.realization.ref,
            "state": self.realization.state.value,
            "changed": self.changed,
            "actor": self.actor,
            "reason": self.reason,
            "note": self.note,
            "protected_aliases": list(self.protected_aliases),
        }


def find_realization(registry: Registry, ref: str) -> Realization:
    """The realization ``ref`` names, in whatever state (so a refusal can name it); ``name:version`` is its newest readable one."""
    parsed = parse_ref(ref)
    target = parsed.manifest_hash
    if parsed.alias is not None:
        alias = registry.get_alias(parsed.name, parsed.version, parsed.alias)
        if alias is None:
            raise NotFoundError(f"no alias {parsed.alias!r} on {parsed.name}:{parsed.version}", ref=ref)
        target = alias.target
    if target is None:
        return registry.resolve(parsed.name, parsed.version)
    found = registry.find_by_manifest_hash(target)
    if found is None or (found.dataset, found.version) != (parsed.name, parsed.version):
        raise NotFoundError(f"no realization of {parsed.name}:{parsed.version} with manifest {target}", ref=ref)
    return found


def approve(registry: Registry, ref: str, *, reason: str, actor: str, gate: Gatekeeper | None = None) -> ApprovalOutcome:
    """PUBLISHED -> ELIGIBLE, recorded as an event with ``actor`` and ``reason``; already ELIGIBLE is a no-op with a note.

    With ``gate``: the approver role is required, the realization's builder is refused (separation of duties), the approval audited.
    The builder and launch are the ones the realization's signed statement names: a row that disagrees is UNTRUSTED (services/trust/builders.py).
    """
    why = check_reason(reason, command="dsv approve")
    realization = find_realization(registry, ref)
    signed = None
    if gate is not None:
        gate.require(Role.APPROVER, definition=realization.ref)
        signed = gate.signed_build(realization)
    # with a gate: refused if the approver built it, audited in the approval's transaction
    actor = actor if gate is None else gate.identity  # who acted is the identity that proved its key, never free text (docs/trust.md)
    updated, changed = registry.approve(realization.id, reason=why, actor=actor, audit_as=None if gate is None else gate.identity, signed=signed)
    note = f"approved by {actor}: {why}" if changed else f"already ELIGIBLE ({describe(latest_approval(registry, updated))}); nothing recorded"
    return ApprovalOutcome("approve", updated, changed, actor, why, note)


def revoke(registry: Registry, ref: str, *, reason: str, actor: str, force: bool = False, gate: Gatekeeper | None = None) -> ApprovalOutcome:
    """ELIGIBLE -> PUBLISHED, recorded as an event; refused (ProtectedAliasError) while a protected alias points at it, unless ``force``."""
    why = check_reason(reason, command="dsv revoke")
    realization = find_realization(registry, ref)
    if gate is not None:
        gate.require(Role.APPROVER, definition=realization.ref)
    actor = actor if gate is None else gate.identity  # the proven identity, as for approve
    updated, changed, pointing = registry.revoke(realization.id, reason=why, actor=actor, force=force, audit_as=None if gate is None else gate.identity)
    if not changed:
        note = "not ELIGIBLE (PUBLISHED): no approval to revoke; nothing recorded"
    elif pointing:
        note = f"approval revoked by {actor} (forced): protected alias(es) {', '.join(pointing)} still point at this PUBLISHED realization"
    else:
        note = f"approval revoked by {actor}: {why}"
    return ApprovalOutcome("revoke", updated, changed, actor, why, note, tuple(pointing))


def latest_approval(registry: Registry, realization: Realization) -> RealizationEvent | None:
    """The event that made ``realization`` ELIGIBLE, when it is ELIGIBLE now; else None."""
    if realization.state is not RealizationState.ELIGIBLE:
        return None
    approvals = [e for e in registry.events(realization.id) if e.to_state is RealizationState.ELIGIBLE]
    return approvals[-1] if approvals else None


def describe(event: RealizationEvent | None) -> str:
    return "no approval recorded" if event is None else f"approved by {event.actor} at {event.at.isoformat(timespec='seconds')}: {event.reason}"


def approval_metadata(registry: Registry, realization: Realization) -> dict[str, str | None]:
    """``state`` and the approval (``approved_by``, ``approval_reason``, ``approved_at``) for UIs and ``dsv status``."""
    event = latest_approval(registry, realization)
    return {
        "state": realization.state.value,
        "approved_by": None if event is None else event.actor,
        "approval_reason": None if event is None else event.reason,
        "approved_at": None if event is None else event.at.isoformat(),
    }


def approval_of_ref(registry: Registry, ref: str) -> dict[str, str | None]:
    """:func:`approval_metadata` of the realization ``ref`` names."""
    return approval_metadata(registry, find_realization(registry, ref))


def approval_text(meta: dict[str, str | None]) -> str:
    """One line for UIs: who approved it and why, or that it is not approved."""
    if meta.get("approved_by") is None:
        return f"not approved ({meta.get('state')}): dsv approve REF --reason TEXT"
    return f"approved by {meta['approved_by']} at {meta['approved_at']}: {meta['approval_reason']}"
