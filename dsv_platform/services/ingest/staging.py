"""The staging branches blocked loads left (`dsv staging list`, `dsv staging discard`).

A canonical load whose blocking check fails leaves its snapshots on a ``wap-`` branch for inspection (docs/storage.md,
"Write-audit-publish"); GC removes the branch past its ref age (7 days). Listing needs no grant (it shows table names,
snapshot ids, batch refs and row counts, as ``dsv gc plan`` does). Discarding one earlier is an operator's act with a
reason, audited (``staging.discard``, target ``staging:<table>#<branch>``): the branch goes, its snapshots stay until GC
expires them, and its batches stay landed, so the next load of their days stages them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv_platform.adapters.iceberg import iceberg_wap as wap
from dsv_platform.adapters.iceberg.iceberg_wap import StagingBranch
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.approval import check_reason
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def staging_branches(platform: Platform) -> list[StagingBranch]:
    """Every staging branch of every canonical table, oldest head first."""
    return wap.staging_branches(platform.tables)


def discard_staging(platform: Platform, table: str, branch: str, *, reason: str) -> StagingBranch:
    """Remove ``table``'s staging branch ``branch`` (operator role) and audit it; NotFoundError when there is none."""
    gate = gatekeeper(platform)
    gate.require(Role.OPERATOR)  # it drops a load's staged rows before GC would: an operator's, as retention changes are
    why = check_reason(reason, command="dsv staging discard")
    found = next((b for b in staging_branches(platform) if (b.table, b.name) == (table, branch)), None)
    if found is None or not wap.discard(platform.tables, table, branch):
        raise NotFoundError(f"no staging branch {branch} on canonical table {table} (dsv staging list)", ref=f"{table}#{branch}")
    detail = {"snapshot_id": found.snapshot_id, "batches": list(found.batches), "rows": found.rows}
    gate.audit("staging.discard", f"staging:{table}#{branch}", reason=why, detail=detail)
    return found


__all__ = ["discard_staging", "staging_branches"]
