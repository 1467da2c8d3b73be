"""Integrity signals for poisoning: pure, vectorized checks a build turns into ``integrity:<signal>`` gates.

Each signal is a :class:`GateResult` (warn unless the definition's ``integrity.blocking`` names it):
an unexpected writer of a source batch, a pinned snapshot outside the approved branches and tags,
one contributor's share of rows beyond a bound, duplicate clusters (identical feature rows with
different labels), label changes concentrated in one batch or writer, changed exclusion rules
between versions, and canonical rows that disagree with the raw batch they came from. A signal whose inputs are not configured passes with ``evaluated: false``.
Details: docs/quarantine.md
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.config_yaml import ConfigError, check_keys
from dsv_platform.core.publication.gates import GateResult

if TYPE_CHECKING:  # pyarrow is imported where a signal computes: parsing a definition stays light (dsv --help, dsv resolve)
    import pyarrow as pa

GATE_PREFIX = "integrity"
SIGNALS = (
    "unexpected_writer",
    "unapproved_snapshot",
    "contributor_share",
    "duplicate_clusters",
    "label_change_concentration",
    "exclusion_rules_changed",
    "raw_agreement",
)
KEYS = frozenset(
    {"blocking", "max_contributor_share_bp", "contributor_column", "label_column", "duplicate_columns", "max_label_change_share_bp", "min_label_changes"}
    | {"raw_agreement"}
)
Detail = dict[str, str | int | bool | None]
BY_BATCH = ("_batch",)
"""``contributor_column: _batch``: the contributor is the raw batch that wrote the example's base-source row."""


@dataclass(frozen=True)
class IntegrityPolicy:
    """A definition's ``integrity:`` block (every key optional)."""

    blocking: frozenset[str] = frozenset()
    max_contributor_share: float | None = None
    contributor_column: str | None = None
    label_column: str | None = None
    duplicate_columns: tuple[str, ...] = ()
    max_label_change_share: float = 0.5
    min_label_changes: int = 5
    raw_agreement: bool = True


def _share(raw: Mapping[str, Any], key: str, file: str | Path) -> float | None:
    """A share given in basis points (an integer 1..10000: the recipe is canonical JSON, which has no floats)."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10_000:
        raise ConfigError(f"must be an integer number of basis points in 1..10000, got {value!r}", file=file, key=f"integrity.{key}")
    return value / 10_000


def _names(raw: Mapping[str, Any], key: str, file: str | Path) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"must be a list of names, got {value!r}", file=file, key=f"integrity.{key}")
    return tuple(value)


def parse_integrity(raw: Any, *, file: str | Path, columns: Collection[str] = ()) -> IntegrityPolicy:
    """The ``integrity`` block of a definition (None: the defaults); unknown keys, signals or columns are ConfigErrors."""
    if raw is None:
        return IntegrityPolicy()
    doc = check_keys(raw, file=file, where="integrity", allowed=KEYS)
    blocking = _names(doc, "blocking", file)
    unknown = sorted(set(blocking) - set(SIGNALS))
    if unknown:
        raise ConfigError(f"unknown signal(s) {unknown}; signals: {list(SIGNALS)}", file=file, key="integrity.blocking")
    for key, allowed in (("contributor_column", (*columns, *BY_BATCH)), ("label_column", tuple(columns))):
        if key in doc and (not isinstance(doc[key], str) or (columns and doc[key] not in allowed)):
            raise ConfigError(f"{doc[key]!r} is not a column of the output contract", file=file, key=f"integrity.{key}")
    duplicate_columns = _names(doc, "duplicate_columns", file)
    missing = sorted(set(duplicate_columns) - set(columns)) if columns else []
    if missing:
        raise ConfigError(f"{missing} are not columns of the output contract", file=file, key="integrity.duplicate_columns")
    min_changes = doc.get("min_label_changes", 5)
    if isinstance(min_changes, bool) or not isinstance(min_changes, int) or min_changes < 1:
        raise ConfigError(f"must be a positive integer, got {min_changes!r}", file=file, key="integrity.min_label_changes")
    raw = doc.get("raw_agreement", True)
    if not isinstance(raw, bool):
        raise ConfigError(f"must be true or false, got {raw!r}", file=file, key="integrity.raw_agreement")
    return IntegrityPolicy(
        blocking=frozenset(blocking),
        raw_agreement=raw,
        max_contributor_share=_share(doc, "max_contributor_share_bp", file),
        contributor_column=doc.get("contributor_column"),
        label_column=doc.get("label_column"),
        duplicate_columns=duplicate_columns,
        max_label_change_share=_share(doc, "max_label_change_share_bp", file) or 0.5,
        min_label_changes=min_changes,
    )


def _gate(policy: IntegrityPolicy, signal: str, passed: bool, detail: Detail, *, evaluated: bool = True) -> GateResult:
    return GateResult(f"{GATE_PREFIX}:{signal}", passed, {"signal": signal, "evaluated": evaluated, **detail}, blocking=signal in policy.blocking)


def _not_evaluated(policy: IntegrityPolicy, signal: str, why: str) -> GateResult:
    return _gate(policy, signal, True, {"note": why}, evaluated=False)


def _listed(values: Sequence[object], limit: int = 10) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def unexpected_writer(policy: IntegrityPolicy, writers: Mapping[str, Mapping[str, str | None]], expected: Mapping[str, Collection[str]]) -> GateResult:
    """``writers``: source -> {batch ref: writer identity (None: not recorded)}; ``expected``: source -> its declared writers."""
    declared = {s: set(w) for s, w in expected.items() if w}
    if not declared:
        return _not_evaluated(policy, "unexpected_writer", "no source of this definition declares its writers")
    bad = sorted(
        f"{src}:{ref} by {w or '(unrecorded)'}" for src, batches in writers.items() if src in declared for ref, w in batches.items() if w not in declared[src]
    )
    return _gate(policy, "unexpected_writer", not bad, {"batches": len(bad), "found": _listed(bad) or None, "sources": ",".join(sorted(declared))})


def unapproved_snapshot(policy: IntegrityPolicy, pins: Mapping[str, int], approved: Mapping[str, Collection[int]]) -> GateResult:
    """``pins``: table -> pinned snapshot id; ``approved``: table -> the snapshots reachable from its approved branches and tags."""
    if not approved:
        return _not_evaluated(policy, "unapproved_snapshot", "no pinned table has approved branches or tags")
    bad = sorted(f"{t}@{sid}" for t, sid in pins.items() if t in approved and sid not in set(approved[t]))
    return _gate(policy, "unapproved_snapshot", not bad, {"outside": _listed(bad) or None, "checked": len([t for t in pins if t in approved])})


def top_share(contributors: pa.Array | pa.ChunkedArray) -> tuple[str | None, float, int]:
    """``(contributor, share, rows)`` of the largest contributor (nulls count as ``(unrecorded)``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(contributors) == 0:
        return None, 0.0, 0
    counts = pc.value_counts(pc.fill_null(pc.cast(contributors, pa.string()), "(unrecorded)"))
    values, n = counts.field("values"), counts.field("counts")
    i = int(pc.index(n, pc.max(n)).as_py())
    return str(values[i].as_py()), int(n[i].as_py()) / len(contributors), int(n[i].as_py())


def contributor_share(policy: IntegrityPolicy, contributors: pa.Array | pa.ChunkedArray | None, *, by: str) -> GateResult:
    """The largest contributor's share of the rows against ``max_contributor_share_bp``."""
    bound = policy.max_contributor_share
    if bound is None or contributors is None:
        return _not_evaluated(policy, "contributor_share", "max_contributor_share_bp is not configured" if bound is None else f"no {by} per row")
    who, share, rows = top_share(contributors)
    detail: Detail = {"by": by, "top": who, "share": f"{share:.4f}", "rows": rows, "of": len(contributors), "bound": f"{bound:.4f}"}
    return _gate(policy, "contributor_share", share <= bound, detail)


def duplicate_clusters(policy: IntegrityPolicy, rows: pa.Table, columns: Sequence[str], label: str | None) -> GateResult:
    """Clusters of rows identical in ``columns`` whose ``label`` differs (a poisoned copy of real rows)."""
    if label is None:
        return _not_evaluated(policy, "duplicate_clusters", "label_column is not configured")
    if rows.num_rows == 0 or not columns:
        return _gate(policy, "duplicate_clusters", True, {"clusters": 0, "rows": 0})
    import pyarrow.compute as pc

    grouped = rows.select([*columns, label]).group_by(list(columns), use_threads=False).aggregate([(label, "count_distinct"), (label, "count")])
    conflicting = grouped.filter(pc.greater(grouped.column(f"{label}_count_distinct"), 1))
    n_rows = int(pc.sum(conflicting.column(f"{label}_count")).as_py() or 0)
    return _gate(policy, "duplicate_clusters", conflicting.num_rows == 0, {"clusters": conflicting.num_rows, "rows": n_rows, "columns": ",".join(columns)})


def label_change_concentration(
    policy: IntegrityPolicy, current: pa.Table | None, baseline: pa.Table | None, key: Sequence[str], contributor: str
) -> GateResult:
    """Labels that changed against the baseline (same key): flags when one contributor holds more than the bound of the changes."""
    label = policy.label_column
    if label is None or current is None or baseline is None:
        why = "label_column is not configured" if label is None else "no baseline realization or no contributor per row"
        return _not_evaluated(policy, "label_change_concentration", why)
    import pyarrow.compute as pc

    before = baseline.select([*key, label]).rename_columns([*key, "__before"])
    joined = current.select([*key, label, contributor]).join(before, keys=list(key), join_type="inner")
    changed = joined.filter(pc.fill_null(pc.not_equal(joined.column(label), joined.column("__before")), False))
    who, share, rows = top_share(changed.column(contributor))
    bound = policy.max_label_change_share
    passed = changed.num_rows < policy.min_label_changes or share <= bound
    detail: Detail = {"changes": changed.num_rows, "top": who, "share": f"{share:.4f}", "rows": rows, "bound": f"{bound:.4f}"}
    detail["min_changes"] = policy.min_label_changes
    return _gate(policy, "label_change_concentration", passed, detail)


def exclusion_rules_changed(policy: IntegrityPolicy, current: Mapping[str, Any], previous: Mapping[str, Any] | None, previous_ref: str | None) -> GateResult:
    """The exclusion rules (population filter, observation and label windows) against the previous version's realization."""
    if previous is None:
        return _not_evaluated(policy, "exclusion_rules_changed", "no earlier version of this dataset was published")
    changed = sorted(k for k in current.keys() | previous.keys() if current.get(k) != previous.get(k))
    detail: Detail = {"previous": previous_ref, "changed": ",".join(changed) or None}
    for k in changed:
        detail[f"{k}.before"], detail[f"{k}.now"] = str(previous.get(k)), str(current.get(k))
    return _gate(policy, "exclusion_rules_changed", not changed, detail)


def raw_agreement(policy: IntegrityPolicy, checked: int, rows: int, disagreeing: Sequence[str], columns: Collection[str], unverified: Sequence[str],
                  seconds: float) -> GateResult:  # fmt: skip
    """Canonical rows against their raw batches: ``disagreeing`` describes each batch that differs (counts and columns, no values)."""
    if not policy.raw_agreement:
        return _not_evaluated(policy, "raw_agreement", "integrity.raw_agreement is false")
    detail: Detail = {"batches": checked, "rows": rows, "disagree": len(disagreeing), "found": _listed(disagreeing, 5) or None}
    detail |= {"columns": ",".join(sorted(columns)) or None, "unverified": _listed(unverified, 5) or None, "seconds": f"{seconds:.3f}"}
    return _gate(policy, "raw_agreement", not disagreeing, detail)
