"""Releasing a retention root (``dsv retention release ID --reason TEXT``): an operator's act, audited.

The registry keeps the release as a lineage edge (``retention_root:<id> --released--> <kind>:<ref>``, actor and
reason); this adds the audit entry ``retention.release`` (target ``retention_root:<id>``, the root's kind and ref)
by the proven identity, once: releasing a released root changes nothing and writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.approval import check_reason
from dsv_platform.core.publication.records import RetentionRoot
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def release_root(platform: Platform, root_id: int, *, reason: str) -> tuple[RetentionRoot, bool]:
    """Release root ``root_id`` (operator role) and audit it; ``(root, released now)``, False when it was released before."""
    gate = gatekeeper(platform)
    gate.require(Role.OPERATOR)  # retention changes are an operator's (docs/trust.md)
    why = check_reason(reason, command="dsv retention release")
    was = next((r for r in platform.registry.list_retention_roots() if r.id == root_id), None)
    if was is None:
        raise NotFoundError(f"no retention root #{root_id} (dsv retention list --all)", ref=str(root_id))
    root = platform.registry.release_retention_root(root_id, gate.identity, why)
    if was.released_at is not None:
        return root, False
    gate.audit("retention.release", f"retention_root:{root.id}", reason=why, detail={"kind": root.kind, "ref": root.ref, "owner": root.owner})
    return root, True
