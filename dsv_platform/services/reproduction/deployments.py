"""Deployments: ``dsv deploy record MODEL_REF --target NAME`` records that a model version serves on a target.

A deployment is an event (model version, target, the proven identity, the time) and a lineage edge
``model_run:<run hash> --deployed_to--> deployment:<target>@<run hash>``, written together, so
``dsv lineage --impact`` reaches the deployments that served a model, and a target's current deployment
keeps its model (and what it was trained on) from GC. Recording needs the publisher role on the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv_platform.core.reproduction.model_registry import Deployment, check_target
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.reproduction.model_registry import find_version, records
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def record_deployment(platform: Platform, model_ref: str, *, target: str, reason: str = "") -> Deployment:
    """Record that the version ``model_ref`` names now serves on ``target``; audited (``deploy.record``)."""
    name = check_target(target)
    version = find_version(platform, model_ref)
    gate = gatekeeper(platform)
    gate.require(Role.PUBLISHER, definition=version.model)
    return records(platform).record_deployment(name, version.run_hash, actor=gate.identity, reason=reason.strip(), audit_as=gate.identity)


def deployments(platform: Platform, *, target: str | None = None, current_only: bool = False) -> list[Deployment]:
    """Deployment events, newest first (of one target); ``current_only``: each target's current one."""
    return records(platform).deployments(target=None if target is None else check_target(target), current_only=current_only)
