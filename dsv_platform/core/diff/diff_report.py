"""The diff of two realizations as one report: what the manifests say, plus the row-level diff.

Partition leaves, pinned source snapshots and the label version come from the manifests
alone; equal partitions are never read. ``RealizationDiff.to_document`` is the ``--json`` shape.

Details: docs/diff.md
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsv_platform.core.diff.diff import Reassignments, RowDiff
from dsv_platform.core.publication.manifest import Manifest, PartitionEntry

EQUAL, CHANGED, ONLY_A, ONLY_B = "equal", "changed", "only_in_a", "only_in_b"


@dataclass(frozen=True)
class PartitionComparison:
    """One partition key: equal (same leaf hash), changed, or present on one side only."""

    key: str
    status: str
    rows_a: int | None
    rows_b: int | None

    def to_document(self) -> dict[str, Any]:
        return {"key": self.key, "status": self.status, "rows_a": self.rows_a, "rows_b": self.rows_b}


def compare_partitions(a: Sequence[PartitionEntry], b: Sequence[PartitionEntry]) -> tuple[PartitionComparison, ...]:
    """Compare partition leaves by key (sorted by key); equal leaf hashes mean equal rows."""
    left, right = {p.key: p for p in a}, {p.key: p for p in b}
    out = []
    for key in sorted(left.keys() | right.keys()):
        pa_, pb = left.get(key), right.get(key)
        if pa_ is None or pb is None:
            status = ONLY_B if pa_ is None else ONLY_A
        else:
            status = EQUAL if pa_.hash == pb.hash else CHANGED
        out.append(PartitionComparison(key, status, None if pa_ is None else pa_.rows, None if pb is None else pb.rows))
    return tuple(out)


def compare_sources(a: Manifest, b: Manifest) -> list[dict[str, Any]]:
    """Every pinned source table of either side with both snapshot ids (``null`` where not pinned)."""
    left, right = {s.table: s for s in a.sources}, {s.table: s for s in b.sources}
    out = []
    for table in sorted(left.keys() | right.keys()):
        sa, sb = left.get(table), right.get(table)
        snap_a, snap_b = (None if s is None else s.snapshot_id for s in (sa, sb))
        out.append({"table": table, "a": snap_a, "b": snap_b, "same": snap_a == snap_b})
    return out


def compare_label_versions(a: Manifest, b: Manifest) -> dict[str, Any]:
    """The label each side pins (``name:version`` or ``null``) and whether they are the same."""
    la, lb = (None if m.labels is None else f"{m.labels.name}:{m.labels.version}" for m in (a, b))
    return {"a": la, "b": lb, "same": la == lb}


def _side(ref: str, manifest: Manifest) -> dict[str, Any]:
    return {"ref": ref, "manifest_hash": manifest.manifest_hash, "content_hash": manifest.content_hash, "rows": manifest.rows}


@dataclass(frozen=True)
class RealizationDiff:
    """Everything ``dsv diff`` reports about realization ``a`` (the old one) against ``b`` (the new one)."""

    ref_a: str
    ref_b: str
    manifest_a: Manifest
    manifest_b: Manifest
    partitions: tuple[PartitionComparison, ...]
    rows: RowDiff
    splits: Reassignments | None

    @property
    def identical(self) -> bool:
        return self.manifest_a.content_hash == self.manifest_b.content_hash

    @property
    def unchanged_rows(self) -> int:
        """Rows present in both with no column changed (the rows of equal partitions included)."""
        equal = sum(p.rows_a or 0 for p in self.partitions if p.status == EQUAL)
        return equal + self.rows.matched - self.rows.changed.count

    def partition_counts(self) -> dict[str, int]:
        counts = {EQUAL: 0, CHANGED: 0, ONLY_A: 0, ONLY_B: 0}
        for p in self.partitions:
            counts[p.status] += 1
        return counts

    def to_document(self) -> dict[str, Any]:
        """The ``dsv diff --json`` object (docs/diff.md)."""
        r = self.rows
        return {
            "a": _side(self.ref_a, self.manifest_a),
            "b": _side(self.ref_b, self.manifest_b),
            "identical": self.identical,
            "key": list(r.key),
            "added": r.added.to_document(),
            "removed": r.removed.to_document(),
            "changed": r.changed.to_document(),
            "unchanged": self.unchanged_rows,
            "partitions": {**self.partition_counts(), "differ": [p.to_document() for p in self.partitions if p.status != EQUAL]},
            "columns": {"changed": dict(r.columns), "only_in_a": list(r.only_in_a), "only_in_b": list(r.only_in_b)},
            "label_flips": [f.to_document() for f in r.flips],
            "split_reassignments": None if self.splits is None else self.splits.to_document(),
            "sources": compare_sources(self.manifest_a, self.manifest_b),
            "label_version": compare_label_versions(self.manifest_a, self.manifest_b),
        }
