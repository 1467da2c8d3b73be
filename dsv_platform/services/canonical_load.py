"""Loading landed batches into canonical tables, and building label versions from canonical tables.

``load_partition`` applies every loadable landed batch of one source and day
(in arrival order) to its canonical table: parse, deduplicate, validate,
quarantine failing rows, append the rest as new versions. It then reads the
partition as corrected now and hashes it (core.hashing), which is the
partition's data version. ``build_labels`` computes one label definition over
everything known and appends only labels that changed, recorded at the
inputs' watermark (the latest ``_recorded_at`` among them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

import pyarrow.compute as pc

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg_values import RECORDED_AT, AppendOutcome
from dsv_platform.adapters.landing import LandingRecord, LandingZone
from dsv_platform.core.hashing import DatasetDigest, hash_table
from dsv_platform.core.validation import FailureCase
from dsv_platform.domain.batch import prepare_batch
from dsv_platform.domain.labels import LabelDefinition, compute_labels
from dsv_platform.domain.sources import CHARGEBACKS, FRAUD_LABELS, TRANSACTIONS, TableSpec


@dataclass(frozen=True)
class BatchLoad:
    record: LandingRecord
    outcome: AppendOutcome
    accepted: int
    rejected: int
    duplicates_dropped: int
    failures: tuple[FailureCase, ...]


@dataclass(frozen=True)
class PartitionLoad:
    """One canonical partition after loading: what each batch did, the snapshot and the content digest."""

    table: str
    day: dt.date
    batches: tuple[BatchLoad, ...]
    quarantined: tuple[LandingRecord, ...]
    snapshot_id: int | None
    digest: DatasetDigest

    @property
    def rows(self) -> int:
        return self.digest.rows

    @property
    def failures(self) -> tuple[FailureCase, ...]:
        return tuple(f for b in self.batches for f in b.failures)

    @property
    def rejected_rows(self) -> int:
        return sum(b.rejected for b in self.batches)


def load_partition(landing: LandingZone, tables: CanonicalTables, spec: TableSpec, day: dt.date) -> PartitionLoad:
    """Apply the landed batches of ``spec`` for ``day`` to its canonical table (idempotent)."""
    contract = spec.contract
    loads = []
    for record in landing.loadable(spec.name, day):
        prepared = prepare_batch(landing.read(record), contract, spec.aliases)
        outcome = tables.append(spec, prepared.accepted, recorded_at=record.recorded_at, batch=record.batch_ref)
        loads.append(BatchLoad(record, outcome, prepared.accepted.num_rows, prepared.rejected.num_rows, prepared.duplicates_dropped, prepared.report.failures))
    quarantined = tuple(r for r in landing.records(spec.name, day) if not r.loadable)
    rows = tables.read(spec, partition=day)
    digest = hash_table(rows, contract, partition_by=contract.partition_by)
    return PartitionLoad(spec.name, day, tuple(loads), quarantined, tables.current_snapshot_id(spec), digest)


@dataclass(frozen=True)
class LabelBuild:
    """One label version after a build: the append outcome, watermark, digest and class counts."""

    definition: LabelDefinition
    outcome: AppendOutcome | None
    watermark: dt.datetime | None
    digest: DatasetDigest
    positives: int

    @property
    def rows(self) -> int:
        return self.digest.rows


def label_spec(definition: LabelDefinition) -> TableSpec:
    """The table spec of one label version (``labels_fraud_v6``), sharing the fraud_labels contract."""
    return replace(FRAUD_LABELS, name=definition.table_name)


def watermark(tables: CanonicalTables, *specs: TableSpec) -> dt.datetime | None:
    """The latest ``_recorded_at`` across ``specs``: everything known up to it is in the tables."""
    marks = []
    for spec in specs:
        hist = tables.read(spec, history=True)
        if hist.num_rows:
            marks.append(pc.max(hist.column(RECORDED_AT)).as_py())
    return max(marks) if marks else None


def build_labels(tables: CanonicalTables, definition: LabelDefinition, *, as_of: dt.datetime | None = None) -> LabelBuild:
    """Compute ``definition`` over all transactions and chargebacks known (at ``as_of``, default now)."""
    spec = label_spec(definition)
    mark = watermark(tables, TRANSACTIONS, CHARGEBACKS)
    if as_of is not None and mark is not None:
        mark = min(mark, as_of)
    outcome = None
    if mark is not None:
        labels = compute_labels(tables.read(TRANSACTIONS, as_of=mark), tables.read(CHARGEBACKS, as_of=mark), definition)
        outcome = tables.append(spec, labels, recorded_at=mark, batch=f"{definition.ref}@{mark.isoformat()}")
    current = tables.read(spec)
    positives = int(pc.sum(current.column("is_fraud")).as_py() or 0) if current.num_rows else 0
    return LabelBuild(definition, outcome, mark, hash_table(current, spec.contract), positives)


