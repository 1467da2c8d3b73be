"""Building label versions from canonical tables (moved from canonical_load.py).

``build_labels`` computes one label version over its input sources as known at their watermark (the latest
``_recorded_at`` among them) and appends only labels that changed, recorded at that watermark.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_maintenance import max_recorded_at
from dsv_platform.adapters.iceberg.iceberg_values import AppendOutcome
from dsv_platform.core import canonical_json
from dsv_platform.core.config.labels import LabelVersion
from dsv_platform.core.config.source import DerivedTableSpec, SourceSpec, TableSpecLike
from dsv_platform.core.identity.hashing import DatasetDigest, hash_table
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.lineage.lineage import record_label_build

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def label_job(platform: Platform, label: LabelVersion, **_: Any) -> tuple[str, str]:
    return f"label_build.{label.name}.v{label.version}", "LABEL_BUILD"


def label_io(build: LabelBuild, platform: Platform, label: LabelVersion, **_: Any) -> openlineage.IO:
    """Inputs: the input sources at their current snapshots (as the lineage records them); output: the label table's new snapshot."""
    tables = platform.tables
    if build.outcome is None or not build.outcome.appended or build.outcome.snapshot_id is None:
        return [], []
    specs = [platform.config.sources[name] for name in label.inputs]
    inputs = [openlineage.snapshot(platform, s, sid) for s in specs for sid in [tables.current_snapshot_id(s)] if sid is not None]
    spec, sid = label_table_spec(label), build.outcome.snapshot_id
    facet = {"parent_snapshot_id": tables.snapshot_parent(spec, sid), "label_version": label.ref, "content_hash": build.digest.content_hash}
    out = openlineage.snapshot(platform, spec, sid, **facet)
    return inputs, [out]


@dataclass(frozen=True)
class LabelBuild:
    """One label version after a build: the append outcome, watermark, digest and row count."""

    label: LabelVersion
    outcome: AppendOutcome | None
    watermark: dt.datetime | None
    digest: DatasetDigest

    @property
    def rows(self) -> int:
        return self.digest.rows

    @property
    def definition(self) -> LabelVersion:
        """The label version (the name before labels were configuration)."""
        return self.label


def label_table_spec(label: LabelVersion) -> DerivedTableSpec:
    """The canonical table of one label version (``labels_<name>_v<version>``) under the label file's contract."""
    return DerivedTableSpec(label.table_name, label.contract)


def watermark(tables: CanonicalTables, *specs: TableSpecLike) -> dt.datetime | None:
    """The latest ``_recorded_at`` across ``specs``: everything known up to it is in the tables.

    From each current snapshot's manifest bounds (:func:`max_recorded_at`, one column read only where a file has none):
    reading every version of every row for one maximum held whole input tables in memory.
    """
    marks = []
    for spec in specs:
        snapshot_id = tables.current_snapshot_id(spec)
        mark = max_recorded_at(tables, spec, snapshot_id) if snapshot_id is not None else None
        if mark is not None:
            marks.append(mark)
    return max(marks) if marks else None


@openlineage.emits(label_job, label_io)
def build_labels(platform: Platform, label: LabelVersion, *, as_of: dt.datetime | None = None) -> LabelBuild:
    """Compute ``label`` over its input sources as known at their watermark (at most ``as_of``), recording its lineage."""
    inputs = [platform.config.sources[name] for name in label.inputs]
    build = build_label_table(platform.tables, label, inputs, as_of=as_of)
    record_label_build(platform, label_table_spec(label), build.outcome, inputs, label=label.ref)
    return build


def build_label_table(tables: CanonicalTables, label: LabelVersion, inputs: list[SourceSpec], *, as_of: dt.datetime | None = None) -> LabelBuild:
    """:func:`build_labels` over given tables and input specs (raw rebuilds use scratch tables)."""
    spec = label_table_spec(label)
    mark = watermark(tables, *inputs)
    if as_of is not None and mark is not None:
        mark = min(mark, as_of)
    outcome = None
    if mark is not None:
        # One label batch per state of the inputs (their snapshot ids), not per watermark: a batch loaded late with an
        # older recorded time (a backfill in any order) leaves the watermark where it was, and must still be labelled.
        state = canonical_json.sha256_hex({s.name: tables.current_snapshot_id(s) for s in inputs})[:16]
        labelled = watermark(tables, spec)  # recorded times of a label table only move forward: a later computation wins
        recorded = mark if labelled is None or labelled < mark else labelled + dt.timedelta(microseconds=1)
        known = {s.name: tables.read(s, as_of=mark) for s in inputs}
        outcome = append_by_partition(tables, spec, label.compute(known), recorded_at=recorded, batch=f"{label.ref}@{mark.isoformat()}#{state}")
    current = tables.read(spec)
    return LabelBuild(label, outcome, mark, hash_table(current, spec.contract))


def append_by_partition(tables: CanonicalTables, spec: TableSpecLike, rows: pa.Table, *, recorded_at: dt.datetime, batch: str) -> AppendOutcome:
    """:meth:`CanonicalTables.append` of ``rows`` one partition at a time (the table read one partition at a time), in one snapshot.

    A partition that holds ``batch`` already is skipped. Unpartitioned tables, no rows or a null partition value: one append.
    """
    part = spec.contract.partition_by
    if part is None or rows.num_rows == 0 or rows.column(part).null_count:
        return tables.append(spec, rows, recorded_at=recorded_at, batch=batch)
    rows = rows.take(pc.sort_indices(rows.column(part)))  # a stable sort: each partition's rows keep their order
    runs = pc.value_counts(rows.column(part))  # in sorted order: one run per partition value

    def chunks() -> Iterator[tuple[Any, pa.Table]]:
        offset = 0
        for run in runs.to_pylist():
            yield run["values"], rows.slice(offset, run["counts"])
            offset += run["counts"]

    scope = tables.partition_filter(spec, [run["values"] for run in runs.to_pylist()])
    outcomes = list(tables.append_days(spec, chunks, recorded_at=recorded_at, batch=batch, row_filter=scope, each_partition=True).values())
    return AppendOutcome(
        spec.name,
        outcomes[-1].snapshot_id,
        sum(o.appended for o in outcomes),
        sum(o.unchanged for o in outcomes),
        all(o.already_applied for o in outcomes),
        max(o.attempts for o in outcomes),
    )
