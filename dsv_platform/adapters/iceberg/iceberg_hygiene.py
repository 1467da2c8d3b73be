"""Table hygiene: the properties and sort order every canonical table gets, at creation or on its next write.

Old metadata files are deleted after each commit, the newest :data:`PREVIOUS_VERSIONS` kept: pins and time
travel name snapshots, which the current metadata file lists whole, never a metadata file (docs/iceberg.md).
Data files aim at :data:`TARGET_FILE_SIZE`; the sort order is the contract's key, and pyiceberg's own writes are
sorted by it within each data file (iceberg_schema.py) (Spark and Trino writes follow it too). An existing table is brought to these
on its next write by metadata commits only: its data files are never rewritten.
"""

from __future__ import annotations

from typing import Any

from dsv_platform.adapters.iceberg.iceberg_schema import with_sort_order
from dsv_platform.adapters.iceberg.iceberg_values import BATCH_METRICS
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.retention.dependent_pins import RETAINED_REF_AGE_MS

PREVIOUS_VERSIONS = 100
"""``write.metadata.previous-versions-max``: Iceberg's own default, now enforced (a copied metadata location reads for 100 commits)."""
TARGET_FILE_SIZE = 128 << 20
"""``write.target-file-size-bytes``: 128 MiB, so a day's partition of a large source plans as several splits in Spark or Trino."""
PIN_MAX_REF_AGE_MS = RETAINED_REF_AGE_MS
"""A pin's ``max_ref_age_ms``: ten years, beyond any retention (GC removes a pin when its realization goes; this only
lets an engine that enforces ref ages drop a pin leaked by a crash, long after anything could still need it)."""

TABLE_PROPERTIES: dict[str, str] = {
    **BATCH_METRICS,
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": str(PREVIOUS_VERSIONS),
    "write.target-file-size-bytes": str(TARGET_FILE_SIZE),
}


def upgraded(txn: Any, tbl: Any, contract: Contract) -> Any:
    """``txn`` with the properties and sort order ``tbl`` lacks (a table made before them): metadata only, in the same commit.

    A hygiene property an operator set to another value is kept; ``_batch``'s full metrics are required (iceberg_batches.py).
    """
    missing = {k: v for k, v in TABLE_PROPERTIES.items() if k not in tbl.properties or (k in BATCH_METRICS and tbl.properties[k] != v)}
    if missing:
        txn = txn.set_properties(missing)
    if tbl.sort_order().is_unsorted and contract.key:
        with_sort_order(txn, contract)
    return txn


__all__ = ["PIN_MAX_REF_AGE_MS", "PREVIOUS_VERSIONS", "TABLE_PROPERTIES", "TARGET_FILE_SIZE", "upgraded"]
