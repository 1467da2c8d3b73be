"""Invariant checks on split assignments, and the assignment hash.

A check reports data problems as failed findings; it never swallows code errors.
Every detail value is an integer or a string (fractions as ``"p/q"``), so a
report's document is canonical JSON.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.split_common import utc_text

if TYPE_CHECKING:
    from dsv_platform.core.splits.policy import SplitPolicy
    from dsv_platform.core.splits.time_split import TimeSplitPolicy

_ESCAPES = (("\\", "\\\\"), ("\b", "\\b"), ("\f", "\\f"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\v", "\\v"))
_EXAMPLES = 5


@dataclass(frozen=True)
class CheckFinding:
    """One named verdict with integer/string detail numbers."""

    name: str
    passed: bool
    detail: Mapping[str, int | str]

    def to_document(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": dict(self.detail)}


@dataclass(frozen=True)
class CheckReport:
    """The findings of one check; passed when every finding passed."""

    findings: tuple[CheckFinding, ...]

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    def failed(self) -> tuple[CheckFinding, ...]:
        return tuple(f for f in self.findings if not f.passed)

    def to_document(self) -> dict[str, Any]:
        return {"passed": self.passed, "findings": [f.to_document() for f in self.findings]}


def _column(table: pa.Table, name: str) -> pa.ChunkedArray:
    if name not in table.column_names:
        raise SplitPolicyError(f"column {name!r} is not in the table (columns: {table.column_names})")
    return table.column(name)


def _split_text(table: pa.Table, split_column: str) -> pa.ChunkedArray:
    return pc.cast(_column(table, split_column), pa.string())


def splits_are_entity_disjoint(table: pa.Table, entity_column: str, split_column: str = "split") -> CheckReport:
    """Fails when an entity (or group) id appears in more than one split, naming the first few such ids."""
    pairs = pa.table({"entity": _column(table, entity_column), "split": _split_text(table, split_column)})
    grouped = pairs.group_by("entity").aggregate([("split", "count_distinct"), ("split", "distinct")])
    leaked = grouped.filter(pc.greater(grouped["split_count_distinct"], 1)).sort_by("entity")
    examples = [f"{row['entity']!r} in {sorted(row['split_distinct'])}" for row in leaked.slice(0, _EXAMPLES).to_pylist()]
    detail: dict[str, int | str] = {"entities": grouped.num_rows, "leaked_entities": leaked.num_rows, "examples": "; ".join(examples)}
    return CheckReport((CheckFinding(f"splits_are_entity_disjoint[{entity_column}]", leaked.num_rows == 0, detail),))


def time_boundaries_respected(table: pa.Table, policy: TimeSplitPolicy, split_column: str = "split") -> CheckReport:
    """One finding per split present: every row's time lies in its split's range of ``policy``."""
    tally = TimeBoundaryTally(policy, split_column)
    tally.add(table)
    return tally.report()


class TimeBoundaryTally:
    """:func:`time_boundaries_respected` over an assignment read batch by batch, in row order (rows counted across batches)."""

    name = "time_boundaries_respected"
    blocking = True

    def __init__(self, policy: TimeSplitPolicy, split_column: str = "split") -> None:
        self.policy, self.split_column, self.offset = policy, split_column, 0
        self.rows: dict[str, int] = {}
        self.violations: dict[str, int] = {}
        self.first: dict[str, tuple[int, str]] = {}

    def add(self, table: pa.Table) -> None:
        times = _column(table, self.policy.column)
        expected = np.array(self.policy.names, dtype=object)[self.policy.split_indices(times)]
        actual = np.array(_split_text(table, self.split_column).to_pylist(), dtype=object)
        for name in set(actual.tolist()):
            rows = np.flatnonzero(actual == name)
            bad = rows[expected[rows] != name]
            self.rows[name] = self.rows.get(name, 0) + len(rows)
            self.violations[name] = self.violations.get(name, 0) + len(bad)
            if len(bad) and name not in self.first:
                self.first[name] = (self.offset + int(bad[0]), utc_text(times[int(bad[0])].as_py()))
        self.offset += table.num_rows

    def report(self) -> CheckReport:
        policy = self.policy
        bounds = {"train": ("", utc_text(policy.train_until)), "validation": (utc_text(policy.train_until), utc_text(policy.validation_until))}
        bounds["test"] = (utc_text(policy.validation_until), "")
        findings = []
        for name in list(policy.names) + sorted(set(self.rows) - set(policy.names), key=str):
            bad = self.violations.get(name, 0)
            lower, upper = bounds.get(name, ("unknown split", "unknown split"))
            detail: dict[str, int | str] = {"rows": self.rows.get(name, 0), "violations": bad, "from": lower, "until": upper}
            if bad:
                detail["first_violation_row"], detail["first_violation_time"] = self.first[name]
            findings.append(CheckFinding(f"time_boundaries_respected[{name}]", bad == 0, detail))
        return CheckReport(tuple(findings))


def expected_parts(policy: SplitPolicy) -> dict[str, int]:
    """Each split's share (in buckets or parts) under a policy that fixes one (the hash-based ones)."""
    parts = policy.expected_parts()
    if parts is None:
        raise SplitPolicyError(f"{type(policy).__name__} has no expected proportions; pass them explicitly")
    return parts


def proportions_within_tolerance(table: pa.Table, expected: Mapping[str, int], tolerance_bp: int, split_column: str = "split") -> CheckReport:
    """Each split's observed fraction is within ``tolerance_bp`` basis points (1/10000) of its expected share.

    ``expected`` maps split names to integer shares (percent, parts, buckets). A split
    present in the data but not expected fails its own finding whatever the tolerance;
    an empty table fails every finding.
    """
    _check_shares(expected, tolerance_bp)
    counts_table = pa.table({"split": _split_text(table, split_column)}).group_by("split").aggregate([("split", "count")])
    counts = dict(zip(counts_table["split"].to_pylist(), counts_table["split_count"].to_pylist(), strict=True))
    return proportions_of_counts(counts, table.num_rows, expected, tolerance_bp)


def _check_shares(expected: Mapping[str, int], tolerance_bp: int) -> None:
    if isinstance(tolerance_bp, bool) or not isinstance(tolerance_bp, int) or tolerance_bp < 0:
        raise SplitPolicyError(f"tolerance_bp {tolerance_bp!r} must be a non-negative integer (basis points)")
    if sum(expected.values()) <= 0 or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in expected.values()):
        raise SplitPolicyError(f"expected shares {dict(expected)!r} must be non-negative integers with a positive sum")


def proportions_of_counts(counts: Mapping[str, int], rows: int, expected: Mapping[str, int], tolerance_bp: int) -> CheckReport:
    """:func:`proportions_within_tolerance` from each split's row count (``rows`` in all)."""
    _check_shares(expected, tolerance_bp)
    total_parts = sum(expected.values())
    findings = []
    for name in list(expected) + sorted(set(counts) - set(expected), key=str):
        want = Fraction(expected.get(name, 0), total_parts)
        got = Fraction(counts.get(name, 0), rows) if rows else Fraction(0)
        off = abs(got - want) * 10000
        detail: dict[str, int | str] = {
            "rows": rows,
            "count": counts.get(name, 0),
            "expected": str(want),
            "observed": str(got),
            "difference_bp_ceil": -((-off.numerator) // off.denominator),
            "tolerance_bp": tolerance_bp,
        }
        findings.append(CheckFinding(f"proportion_within_tolerance[{name}]", name in expected and rows > 0 and off <= tolerance_bp, detail))
    return CheckReport(tuple(findings))


def assignment_hash(table: pa.Table, id_column: str, split_column: str = "split") -> str:
    """Lowercase hex SHA-256 of the lines ``id TAB split LF``, sorted by id then split.

    Ids sort by value (integers numerically, strings by UTF-8 bytes); duplicate
    lines are kept. Integer ids are base 10; strings are as stored (no
    normalization) with the PostgreSQL COPY text escapes of docs/canonical-encoding.md,
    so a TAB or LF inside an id cannot forge a line. Nulls are an error.
    """
    ids = _column(table, id_column)
    _check_ids(ids, id_column)
    pairs = pa.table({"id": ids, "split": _split_text(table, split_column)})
    pairs = pairs.take(pc.sort_indices(pairs, sort_keys=[("id", "ascending"), ("split", "ascending")]))
    digest = hashlib.sha256()
    hash_sorted_lines(digest, pairs["id"], pairs["split"])
    return digest.hexdigest()


def _check_ids(ids: pa.ChunkedArray | pa.Array, id_column: str) -> None:
    if ids.null_count:
        raise SplitPolicyError(f"id column {id_column!r} holds {ids.null_count} nulls; cannot hash the assignment")
    if not (pa.types.is_integer(ids.type) or pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type)):
        raise SplitPolicyError(f"id column {id_column!r} has type {ids.type}; assignment hashes need strings or integers")


def hash_sorted_lines(digest: Any, ids: pa.ChunkedArray | pa.Array, splits: pa.ChunkedArray | pa.Array, id_column: str = "id") -> None:
    """Feed ``digest`` the lines ``id TAB split LF`` of :func:`assignment_hash`, for pairs already in its order.

    An assignment read batch by batch in that order (sorted by id, then split) hashes like :func:`assignment_hash` of the whole.
    """
    _check_ids(ids, id_column)
    columns = [pc.cast(ids, pa.large_string()), pc.cast(splits, pa.large_string())]
    for i, column in enumerate(columns):
        for raw, escaped in _ESCAPES:
            column = pc.replace_substring(column, raw, escaped)
        columns[i] = column
    tab, newline, nothing = (pa.scalar(t, pa.large_string()) for t in ("\t", "\n", ""))
    lines = pc.binary_join_element_wise(pc.binary_join_element_wise(columns[0], columns[1], tab), nothing, newline)
    for chunk in lines.chunks if isinstance(lines, pa.ChunkedArray) else [lines]:
        if len(chunk):
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
            digest.update(memoryview(chunk.buffers()[2])[int(offsets[0]) : int(offsets[-1])])
