"""Write-audit-publish on a canonical table: a load appends to its staging branch, main moves to it when its checks pass.

:func:`stage` points the load's branch at main's current snapshot; ``CanonicalTables.append_days(branch=...)`` appends to
it; :func:`publish` fast-forwards main to the branch's head and removes the branch in one commit, a compare-and-swap on
main (False when main moved meanwhile: the caller loads again on the new main). A blocked load leaves its branch;
:func:`staging_branches` lists them. The pyiceberg objects come from ``CanonicalTables``. Details: docs/storage.md.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyiceberg.exceptions import CommitFailedException

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_batches import summary_batches
from dsv_platform.adapters.iceberg.iceberg_files import head_of, snapshot_id_of
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.ingest.staging import STAGING_MAX_AGE_MS, is_staging_branch


@dataclass(frozen=True)
class StagingBranch:
    """A staging branch of a canonical table: its head snapshot, when that was committed, and its Iceberg ref age; the
    batches and rows its snapshots add beyond main (what the blocked load staged)."""

    table: str
    name: str
    snapshot_id: int
    committed_at: datetime
    max_ref_age_ms: int | None
    batches: tuple[str, ...] = ()
    rows: int = 0

    @property
    def expires_at(self) -> datetime:
        """When GC removes it: its head's commit plus its ref age (``STAGING_MAX_AGE`` when the ref carries none)."""
        return self.committed_at + timedelta(milliseconds=STAGING_MAX_AGE_MS if self.max_ref_age_ms is None else self.max_ref_age_ms)

    def as_dict(self) -> dict[str, object]:
        return {
            "table": self.table,
            "branch": self.name,
            "snapshot_id": self.snapshot_id,
            "committed_at": self.committed_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
            "batches": list(self.batches),
            "rows": self.rows,
        }


def _committed(update: Any, attempt: int) -> bool:
    """Commit a ``manage_snapshots`` update; False (after a short wait) when another commit won the race."""
    try:
        update.commit()
    except CommitFailedException:
        time.sleep(0.05 * attempt)
        return False
    return True


def ancestry(tbl: Any, snapshot_id: int | None) -> set[int]:
    """``snapshot_id`` and every ancestor the table still holds (the parent walk stops at an expired one)."""
    out: set[int] = set()
    snap = None if snapshot_id is None else tbl.snapshot_by_id(snapshot_id)
    while snap is not None and snap.snapshot_id not in out:
        out.add(int(snap.snapshot_id))
        snap = None if snap.parent_snapshot_id is None else tbl.snapshot_by_id(snap.parent_snapshot_id)
    return out


def branch_head(tables: CanonicalTables, spec: TableSpecLike, name: str) -> int | None:
    """The snapshot at the head of branch ``name`` (None: no such branch)."""
    return head_of(tables.table(spec), name)


def stage(tables: CanonicalTables, spec: TableSpecLike, name: str) -> int | None:
    """Point branch ``name`` at main's current snapshot, which is returned (created, or moved back from an earlier load).

    A table without a snapshot gets no branch here: the load's first append makes it (an older one is removed first).
    """
    for attempt in range(1, tables.commit_attempts + 1):
        tbl = tables.table(spec)
        base, ref = snapshot_id_of(tbl), tbl.refs().get(name)
        if (None if ref is None else ref.snapshot_id) == base:
            return base
        manage = tbl.manage_snapshots()
        manage = manage.remove_branch(name) if base is None else manage.create_branch(base, name, max_ref_age_ms=STAGING_MAX_AGE_MS)
        if _committed(manage, attempt):
            return base
    raise CanonicalTableError(f"staging branch {name!r} of {tables.identifier(spec)} lost {tables.commit_attempts} commit races in a row")


def publish(tables: CanonicalTables, spec: TableSpecLike, name: str, head: int | None, made: Collection[int]) -> bool:
    """Fast-forward main to ``head``, the head of branch ``name`` holding the snapshots ``made``, and remove the branch (one commit).

    True when main is at ``head`` after it (or the load made nothing: the branch is removed). False, nothing changed, when
    main moved to a snapshot ``head`` does not descend from, or the branch no longer holds ``made``: the caller loads again.
    """
    for attempt in range(1, tables.commit_attempts + 1):
        tbl = tables.table(spec)
        main, ref = snapshot_id_of(tbl), tbl.refs().get(name)
        chain = ancestry(tbl, head)
        if made and ((ref is not None and ref.snapshot_id != head) or not set(made) <= chain):
            return False  # another load of the same batches moved the branch
        if not made or main == head:  # nothing staged, or a load of the same batches published it already
            if ref is None or _committed(tbl.manage_snapshots().remove_branch(name), attempt):
                return True
            continue
        if main is not None and main not in chain:
            return False  # main moved: ``head`` is no fast-forward of it
        manage = tbl.manage_snapshots().set_current_snapshot(snapshot_id=head)  # asserts main is still ``main``
        if _committed(manage if ref is None else manage.remove_branch(name), attempt):
            return True
    return False


def discard(tables: CanonicalTables, table: str, name: str) -> bool:
    """Remove branch ``name`` of the existing ``table`` if present (its snapshots stay until expired); True when removed."""
    for attempt in range(1, tables.commit_attempts + 1):
        tbl = tables.load(table)
        if name not in tbl.refs():
            return False
        if _committed(tbl.manage_snapshots().remove_branch(name), attempt):
            return True
    raise CanonicalTableError(f"removing branch {name!r} of {tables.namespace}.{table} lost {tables.commit_attempts} commit races in a row")


def staging_refs(tbl: Any) -> list[tuple[str, int, int | None]]:
    """The staging branches (``wap-*``) of one pyiceberg table: name, head snapshot and ``max-ref-age-ms``."""
    refs = tbl.refs().items()
    return sorted((n, int(r.snapshot_id), r.max_ref_age_ms) for n, r in refs if str(r.snapshot_ref_type) == "branch" and is_staging_branch(n))


def _beyond_main(tbl: Any, head: int) -> tuple[tuple[str, ...], int]:
    """The batches the snapshot summaries from ``head`` back to main's history name, and the rows they add."""
    main, batches, rows = ancestry(tbl, snapshot_id_of(tbl)), set[str](), 0
    snap = tbl.snapshot_by_id(head)
    while snap is not None and snap.snapshot_id not in main:
        batches.update(summary_batches(snap) or ())
        rows += int(snap.summary.get("added-records", 0)) if snap.summary is not None else 0
        snap = None if snap.parent_snapshot_id is None else tbl.snapshot_by_id(snap.parent_snapshot_id)
    return tuple(sorted(batches)), rows


def staging_branches(tables: CanonicalTables) -> list[StagingBranch]:
    """Every staging branch of every table of the namespace, oldest head first."""
    out = []
    for table in tables.table_names():
        tbl = tables.load(table)
        for name, sid, age in staging_refs(tbl):
            snap = tbl.snapshot_by_id(sid)
            if snap is not None:
                batches, rows = _beyond_main(tbl, sid)
                out.append(StagingBranch(table, name, sid, datetime.fromtimestamp(snap.timestamp_ms / 1000, UTC), age, batches, rows))
    return sorted(out, key=lambda b: (b.committed_at, b.table, b.name))


__all__ = ["StagingBranch", "ancestry", "branch_head", "discard", "publish", "stage", "staging_branches", "staging_refs"]
