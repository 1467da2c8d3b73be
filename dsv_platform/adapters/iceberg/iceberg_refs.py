"""Tags on existing canonical tables by table name: a report's or model's dependent pin, and a tag's ref age.

Iceberg's ``max-ref-age-ms`` on a tag: an engine expiring snapshots (Spark's ``expire_snapshots``) drops a tag
whose snapshot is older than it; pyiceberg writes it but never acts on it, the platform's GC does
(core/retention/dependent_pins.py). Setting it again is a ``set-snapshot-ref`` of the same snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pyiceberg.exceptions import CommitFailedException

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_values import PinnedSnapshot


def pin_snapshot(tables: CanonicalTables, table: str, tag: str, snapshot_id: int, *, max_ref_age_ms: int) -> PinnedSnapshot:
    """Tag ``snapshot_id`` of the existing ``table`` as ``tag``; the same pair again is a no-op, the tag on another snapshot an error."""
    for attempt in range(1, tables.commit_attempts + 1):
        tbl = tables.load(table)
        if tbl.snapshot_by_id(snapshot_id) is None:
            raise CanonicalTableError(f"table {tables.namespace}.{table} has no snapshot {snapshot_id} to pin as {tag!r} (expired?)")
        existing = tbl.refs().get(tag)
        if existing is not None:
            if existing.snapshot_id != snapshot_id:
                raise CanonicalTableError(f"tag {tag!r} on {tables.namespace}.{table} already pins snapshot {existing.snapshot_id}, not {snapshot_id}")
            return PinnedSnapshot(table, snapshot_id, tag)
        try:
            tbl.manage_snapshots().create_tag(snapshot_id, tag, max_ref_age_ms=max_ref_age_ms).commit()
        except CommitFailedException:
            time.sleep(0.05 * attempt)
            continue
        return PinnedSnapshot(table, snapshot_id, tag)
    raise CanonicalTableError(f"tagging {tables.namespace}.{table} lost {tables.commit_attempts} commit races in a row")


def set_ref_ages(tables: CanonicalTables, table: str, ages: Mapping[str, int]) -> list[str]:
    """Give each tag still present its ``max-ref-age-ms`` (same snapshot), in one commit; returns the tags set."""
    for attempt in range(1, tables.commit_attempts + 1):
        tbl = tables.load(table)
        refs = tbl.refs()
        present = [t for t in sorted(ages) if t in refs and str(refs[t].snapshot_ref_type) == "tag"]
        if not present:
            return []
        manage = tbl.manage_snapshots()
        for t in present:
            manage = manage.create_tag(refs[t].snapshot_id, t, max_ref_age_ms=ages[t])
        try:
            manage.commit()
        except CommitFailedException:
            time.sleep(0.05 * attempt)
            continue
        return present
    raise CanonicalTableError(f"setting tag ages of {tables.namespace}.{table} lost {tables.commit_attempts} commit races in a row")


def ref_ages(tables: CanonicalTables, table: str) -> dict[str, int | None]:
    """Tag name -> its ``max-ref-age-ms`` (None: unset)."""
    return {n: r.max_ref_age_ms for n, r in sorted(tables.load(table).refs().items()) if str(r.snapshot_ref_type) == "tag"}


__all__ = ["pin_snapshot", "ref_ages", "set_ref_ages"]
