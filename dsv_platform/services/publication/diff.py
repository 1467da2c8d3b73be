"""Diff two realizations by reference (``dsv diff``): resolve both, read only what differs, compare.

Equal partitions (same leaf hash in both manifests) are never read; the split assignments
are read only when their hashes differ.

Details: docs/diff.md
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from dsv_platform.core.diff.diff import DEFAULT_EXAMPLES, DiffError, Reassignments, diff_rows, label_column_ok, split_reassignments
from dsv_platform.core.diff.diff_report import CHANGED, ONLY_A, ONLY_B, PartitionComparison, RealizationDiff, compare_partitions
from dsv_platform.core.publication.refs import DatasetRef
from dsv_platform.services.publication.datasets import Dataset, open_dataset, read_object

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

__all__ = ["DiffError", "diff_realizations", "label_columns_of"]


def _read(ds: Dataset, keys: set[str]) -> pa.Table:
    """The partitions of ``ds`` named in ``keys`` (verified as read), or an empty table under its contract."""
    tables = [read_object(ds.store, ds.ref, entry) for entry in ds.partitions if entry.key in keys]
    if not tables:
        return ds.contract.arrow_schema.empty_table()
    return pa.concat_tables(tables, promote_options="permissive")


def label_columns_of(platform: Platform, a: Dataset, b: Dataset) -> list[str]:
    """The bool label columns both realizations hold, from the label contracts their manifests pin (none if unpinned)."""
    la, lb = a.manifest.labels, b.manifest.labels
    if la is None or lb is None:
        return []
    names: list[str] = []
    for pin in (la, lb):
        versions = platform.config.labels.get(pin.name, {})
        for version in versions.values():
            names += [c.name for c in version.contract.columns if c.name not in version.key and c.name not in names]
    schema_a, schema_b = a.contract.arrow_schema, b.contract.arrow_schema
    return [
        n for n in names
        if n in schema_a.names and n in schema_b.names and pa.types.is_boolean(schema_a.field(n).type) and pa.types.is_boolean(schema_b.field(n).type)
    ]  # fmt: skip


def _splits(a: Dataset, b: Dataset, key: Sequence[str], examples: int) -> Reassignments | None:
    sa, sb = a.manifest.splits, b.manifest.splits
    if sa is None or sb is None:
        return None
    if sa.assignment_hash == sb.assignment_hash:
        return Reassignments(0, {}, skipped=True)
    ta, tb = a.split_assignment, b.split_assignment
    assert ta is not None and tb is not None
    if any(k not in t.column_names for k in key for t in (ta, tb)):
        return None
    return split_reassignments(ta, tb, key, examples=examples)


def _keys(partitions: Sequence[PartitionComparison], *statuses: str) -> set[str]:
    return {p.key for p in partitions if p.status in statuses}


def diff_datasets(
    platform: Platform, a: Dataset, b: Dataset, *, label_columns: Sequence[str] | None = None, examples: int = DEFAULT_EXAMPLES
) -> RealizationDiff:
    """Diff two opened realizations; ``label_columns=None`` takes the label columns from the pinned label contracts."""
    key_a, key_b = tuple(a.contract.key), tuple(b.contract.key)
    if key_a != key_b:
        raise DiffError(f"{a.ref} is keyed by {list(key_a)} and {b.ref} by {list(key_b)}; a diff compares realizations with the same key")
    partitions = compare_partitions(a.partitions, b.partitions)
    rows_a = _read(a, _keys(partitions, CHANGED, ONLY_A))
    rows_b = _read(b, _keys(partitions, CHANGED, ONLY_B))
    labels = label_columns_of(platform, a, b) if label_columns is None else list(label_columns)
    schema_a, schema_b = a.contract.arrow_schema.empty_table(), b.contract.arrow_schema.empty_table()
    for name in labels:
        if not label_column_ok(schema_a, schema_b, name):
            raise DiffError(f"label column {name!r} is not a bool or integer column of both {a.ref} and {b.ref}")
    rows = diff_rows(rows_a, rows_b, key_a, label_columns=labels, examples=examples)
    return RealizationDiff(
        ref_a=a.ref,
        ref_b=b.ref,
        manifest_a=a.manifest,
        manifest_b=b.manifest,
        partitions=partitions,
        rows=rows,
        splits=_splits(a, b, key_a, examples),
    )


def diff_realizations(
    platform: Platform,
    ref_a: str | DatasetRef,
    ref_b: str | DatasetRef,
    *,
    label_columns: Sequence[str] | None = None,
    examples: int = DEFAULT_EXAMPLES,
    actor: str | None = None,
) -> RealizationDiff:
    """Resolve both references (typed resolution failures keep their kinds) and diff the realizations."""
    a = open_dataset(platform, ref_a, actor=actor)
    b = open_dataset(platform, ref_b, actor=actor)
    return diff_datasets(platform, a, b, label_columns=label_columns, examples=examples)
