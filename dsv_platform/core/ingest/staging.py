"""Write-audit-publish staging branches: a canonical load's snapshots go to one, and main moves only when its checks pass.

The branch is named for the load (its batches and days), so loading the same batches again reuses the name; one a
blocked load left stays for inspection until it is older than :data:`STAGING_MAX_AGE` (then GC removes it).
Details: docs/storage.md ("Write-audit-publish").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from dsv_platform.core import canonical_json

STAGING_PREFIX = "wap-"
STAGING_MAX_AGE = dt.timedelta(days=7)
"""How long a staging branch a blocked load left is kept (its Iceberg ``max-ref-age-ms``); GC removes it after."""
STAGING_MAX_AGE_MS = int(STAGING_MAX_AGE.total_seconds() * 1000)


def staging_branch(batches: Iterable[str], days: Iterable[object]) -> str:
    """The branch of the load of these batch refs over these days: ``wap-`` and 16 hex digits."""
    token = canonical_json.sha256_hex({"batches": sorted(set(batches)), "days": sorted({str(d) for d in days})})
    return f"{STAGING_PREFIX}{token[:16]}"


def is_staging_branch(name: str) -> bool:
    return name.startswith(STAGING_PREFIX)


__all__ = ["STAGING_MAX_AGE", "STAGING_MAX_AGE_MS", "STAGING_PREFIX", "is_staging_branch", "staging_branch"]
