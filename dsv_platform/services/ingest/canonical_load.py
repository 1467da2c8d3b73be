"""Loading landed batches into canonical tables (label versions are built in label_build.py).

``load_partition`` applies every loadable landed batch indexed under one source and
day (in arrival order) to its canonical table: parse, deduplicate, validate, quarantine
failing rows, append the rest (that day's rows) as new versions; then reads the partition
as corrected now, hashes it (its data version) and evaluates the contract's per-load
semantic rules on it (core.semantic_rules.load_rules).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, limits_of
from dsv_platform.adapters.iceberg import iceberg_wap as wap
from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_schema import evolve_schema
from dsv_platform.adapters.iceberg.iceberg_values import AppendOutcome
from dsv_platform.adapters.objects.landing import LandingRecord, LandingZone
from dsv_platform.adapters.registry.quarantine import QuarantineRecords
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.contracts.semantic import RuleResult
from dsv_platform.core.contracts.semantic_rules import evaluate_load, load_rules, passed
from dsv_platform.core.contracts.validation import FailureCase
from dsv_platform.core.identity.hashing import DatasetDigest
from dsv_platform.core.ingest.batch_stream import BatchPlan, BatchScan, plan_batch, validated_chunks
from dsv_platform.core.ingest.landing_stream import Opener, UnreadableBatch
from dsv_platform.core.ingest.scan_memo import recall
from dsv_platform.core.ingest.staging import staging_branch
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.services.ingest.partition_digest import partition_digest
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.lineage.lineage import record_partition_load
from dsv_platform.services.trust import trust

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


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
    semantic: tuple[RuleResult, ...] = ()  # the contract's per-load rules on the partition as corrected now
    staged: str | None = None  # a blocked load: the staging branch holding its appends (main is unchanged)
    staged_snapshot_id: int | None = None  # that branch's head

    @property
    def rows(self) -> int:
        return self.digest.rows

    @property
    def failures(self) -> tuple[FailureCase, ...]:
        return tuple(f for b in self.batches for f in b.failures)

    @property
    def rejected_rows(self) -> int:
        return sum(b.rejected for b in self.batches)


# ---------------------------------------------------------------- lineage descriptors (services/lineage/openlineage.py emits them)


def load_job(platform: Platform, spec: SourceSpec, day: Any, *_: Any) -> tuple[str, str]:
    return f"canonical_load.{spec.name}", "CANONICAL_LOAD"


def load_io(load: PartitionLoad, platform: Platform, spec: SourceSpec, day: Any, *_: Any) -> openlineage.IO:
    """Inputs: the batches that made snapshots; output: the table at the partition's snapshot, each append in the ``dsv`` facet."""
    if load.staged is not None:  # a blocked load: nothing reached main
        return [], []
    made = [b for b in load.batches if b.outcome.appended and b.outcome.snapshot_id is not None]
    ns = openlineage.namespace(platform)
    if load.snapshot_id is None:
        return [openlineage.raw_batch(ns, b.record) for b in made], []
    appends = [{"batch": b.record.batch_ref, "snapshot_id": b.outcome.snapshot_id} for b in made]
    parent = platform.tables.snapshot_parent(spec, load.snapshot_id)
    facet = {"parent_snapshot_id": parent, "partition": str(load.day), "content_hash": load.digest.content_hash, "appends": appends}
    out = openlineage.snapshot(platform, spec, load.snapshot_id, **facet)
    return [openlineage.raw_batch(ns, b.record) for b in made], [out]


def load_partition(platform: Platform, spec: SourceSpec, day: dt.date) -> PartitionLoad:
    """Apply the landed batches of ``spec`` indexed under ``day`` to its canonical table (idempotent), recording raw_batch lineage."""
    return load_partitions(platform, spec, [day])[0]


def load_partitions(platform: Platform, spec: SourceSpec, days: Sequence[dt.date], *, progress: Progress = SILENT) -> list[PartitionLoad]:
    """:func:`load_partition` of several days: each landed batch is read once and appended in one snapshot for all its days.

    ``progress``: the stages ``load`` (the landed rows appended, batch by batch) and ``partitions`` (each day hashed).
    """
    held = QuarantineRecords(platform.registry.engine).quarantined_batches()  # an operator's quarantine: never loaded (docs/quarantine.md)
    evolved = evolve_schema(platform.tables, spec)  # the contract's compatible changes, or SchemaEvolutionError (docs/schema-evolution.md)
    if evolved is not None:
        trust.audit(platform, "schema_evolved", f"canonical:{spec.name}", reason=evolved.describe(), detail=evolved.to_document())
    loaded = load_landed_days(platform.landing, platform.tables, spec, days, skip=held, progress=progress, limits=limits_of(platform.settings))
    return [_recorded(platform, spec, load.day, load) for load in loaded]


@openlineage.emits(load_job, load_io)
def _recorded(platform: Platform, spec: SourceSpec, day: dt.date, load: PartitionLoad) -> PartitionLoad:
    """One day's load, its raw_batch lineage recorded (and, with OpenLineage on, one run event per day); a blocked load's none."""
    record_partition_load(platform, spec, [(b.record.batch_ref, b.outcome) for b in load.batches if load.staged is None])
    return load


def held_batches(platform: Platform, sources: Collection[str]) -> tuple[str, ...]:
    """The batch refs of ``sources`` an active raw-batch quarantine holds: a new realization reads none of their rows."""
    held = QuarantineRecords(platform.registry.engine).quarantined_batches()
    if not held:
        return ()
    return tuple(sorted({r.batch_ref for r in platform.landing.records() if r.batch_ref in held and r.source in sources}))


def rows_of_day(rows: pa.Table, spec: SourceSpec, day: dt.date) -> pa.Table:
    """The rows whose partition column (``spec.partition_by``) falls on ``day``; every row of a source without one."""
    if spec.partition_by is None:
        return rows
    column = rows.column(spec.partition_by)
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp(column.type.unit)), pa.date32())  # a timestamp's UTC day
    return rows.filter(pc.fill_null(pc.equal(column, pa.scalar(day, pa.date32())), False))


def load_landed(landing: LandingZone, tables: CanonicalTables, spec: SourceSpec, day: dt.date, *, skip: Collection[str] = ()) -> PartitionLoad:
    """:func:`load_partition` over a given landing zone and tables (raw rebuilds use scratch tables); ``skip``: batch refs held back."""
    return load_landed_days(landing, tables, spec, [day], skip=skip)[0]


def load_landed_days(
    landing: LandingZone,
    tables: CanonicalTables,
    spec: SourceSpec,
    days: Sequence[dt.date],
    *,
    skip: Collection[str] = (),
    progress: Progress = SILENT,
    limits: EngineLimits | None = None,
) -> list[PartitionLoad]:
    """:func:`load_landed` of several days; per day the batches apply in ``recorded_at`` then landing order, as one day alone would.

    Write-audit-publish: the batches append to the load's staging branch (core/ingest/staging.py); each day's digest and
    per-load rules are computed on its head; main is fast-forwarded to it only when no blocking rule failed, else main is
    unchanged and the loads name the branch (``staged``). Main moved meanwhile: the load runs again on the new main.
    ``limits``: each day's digest runs in a scratch build engine with them (None: the day is read and hashed in memory).
    """
    per_day = {d: [r for r in landing.loadable(spec.name, d) if r.batch_ref not in skip] for d in days}
    batches: dict[str, list[LandingRecord]] = {}
    for record in (r for d in days for r in per_day[d]):
        batches.setdefault(record.batch_ref, []).append(record)
    branch = staging_branch(batches, days) if batches else None  # nothing landed: nothing to stage, main is read
    for _ in range(tables.commit_attempts):
        base = wap.stage(tables, spec, branch) if branch else tables.current_snapshot_id(spec)
        done, made = _append_batches(landing, tables, spec, batches, skip, progress, branch)
        head = wap.branch_head(tables, spec, branch) if branch and made else base
        loads = _partitions(landing, tables, spec, days, per_day, done, made, (base, head), skip, limits, progress)
        if any(not passed(load.semantic) for load in loads):  # a blocking rule failed: main stays where it is
            return _blocked(tables, spec, loads, branch, head if made else None, limits)
        if branch is None or wap.publish(tables, spec, branch, head, made):
            return loads
    if branch is not None:
        wap.discard(tables, spec.name, branch)
    raise CanonicalTableError(f"loading {tables.identifier(spec)}: main moved under {tables.commit_attempts} loads in a row; retry the run")


def _append_batches(
    landing: LandingZone,
    tables: CanonicalTables,
    spec: SourceSpec,
    batches: dict[str, list[LandingRecord]],
    skip: Collection[str],
    progress: Progress,
    branch: str | None,
) -> tuple[dict[tuple[dt.date, str], BatchLoad], list[int]]:
    """Each landed batch appended (to ``branch``) in recorded then landing order: what each did, and the snapshots made in order."""
    done: dict[tuple[dt.date, str], BatchLoad] = {}
    made = list[int]()  # the snapshots this run makes, in commit order
    progress.stage("load", total=sum(r.rows for rs in batches.values() for r in rs))
    for records in sorted(batches.values(), key=lambda rs: min((r.recorded_at, r.seq) for r in rs)):
        loaded = _load_batch(landing, tables, spec, records, skip, branch)
        made += sorted({b.outcome.snapshot_id for b in loaded.values() if b.outcome.appended and b.outcome.snapshot_id is not None})
        done |= loaded
        progress.advance(sum(r.rows for r in records))
    return done, made


def _partitions(
    landing: LandingZone,
    tables: CanonicalTables,
    spec: SourceSpec,
    days: Sequence[dt.date],
    per_day: dict[dt.date, list[LandingRecord]],
    done: dict[tuple[dt.date, str], BatchLoad],
    made: list[int],
    at: tuple[int | None, int | None],
    skip: Collection[str],
    limits: EngineLimits | None,
    progress: Progress,
) -> list[PartitionLoad]:
    """Each day after the appends, read at ``at[1]`` (the branch's head; ``at[0]``: main's snapshot when the load began)."""
    contract, (snapshot, head) = spec.contract, at
    progress.stage("partitions", total=len(days), unit="days")
    loads = []
    for day in days:  # a day's snapshot: its last append, else the latest of the days before it (what loading day by day left current)
        quarantined = tuple(r for r in landing.records(spec.name, day) if not r.loadable or r.batch_ref in skip)
        digest = partition_digest(tables, spec, day, limits, snapshot_id=head)  # streamed through the engine: memory does not follow the day
        semantic = evaluate_load(tables.read(spec, partition=day, snapshot_id=head), contract) if load_rules(contract) else ()
        batch_loads = tuple(done[(day, r.batch_ref)] for r in per_day[day])
        mine = [made.index(b.outcome.snapshot_id) for b in batch_loads if b.outcome.appended and b.outcome.snapshot_id in made]
        latest = made[max(mine)] if mine else snapshot
        snapshot = latest if snapshot not in made or (latest in made and made.index(latest) > made.index(snapshot)) else snapshot
        loads.append(PartitionLoad(spec.name, day, batch_loads, quarantined, latest, digest, semantic))
        progress.advance(1)
    progress.done()
    return loads


def _blocked(
    tables: CanonicalTables, spec: SourceSpec, loads: list[PartitionLoad], branch: str | None, head: int | None, limits: EngineLimits | None
) -> list[PartitionLoad]:
    """The loads of a blocked run: main's snapshot and digests (unchanged), the rules' verdict on the branch that holds the appends."""
    if branch is None or head is None:  # nothing was appended: the rules failed on main itself, nothing to keep staged
        if branch is not None:
            wap.discard(tables, spec.name, branch)
        return loads
    main = tables.current_snapshot_id(spec)
    return [replace(x, snapshot_id=main, digest=partition_digest(tables, spec, x.day, limits), staged=branch, staged_snapshot_id=head) for x in loads]


def _load_batch(
    landing: LandingZone, tables: CanonicalTables, spec: SourceSpec, records: list[LandingRecord], skip: Collection[str] = (), branch: str | None = None
) -> dict[tuple[dt.date, str], BatchLoad]:
    """Append one landed batch's rows of the days of ``records`` (its index entries), read once in record batches, in one snapshot.

    A batch recorded before batches already loaded into a day it changes has their rows read again (``restated``):
    those they skipped as unchanged are written with it, so as known at any time the day is what the recorded order gives.
    """
    first, days = records[0], [r.day for r in records]

    def opener() -> BinaryIO:
        return landing.open(first)

    plan = _plan(opener, spec, first.digest)
    seen = BatchScan(0, 0, 0, ())

    def chunks() -> Iterator[tuple[dt.date, pa.Table]]:
        nonlocal seen
        accepted: dict[dt.date | None, int] = dict.fromkeys(days, 0)
        rejected, rows, failures = 0, 0, list[FailureCase]()
        for good, bad, chunk_failures in validated_chunks(opener, spec, plan) if plan is not None else ():
            rejected, rows, failures = rejected + bad.num_rows, rows + good.num_rows + bad.num_rows, failures + chunk_failures
            for day in days:
                mine = rows_of_day(good, spec, day)
                accepted[day] += mine.num_rows
                yield day, mine
        failures.sort(key=lambda f: (f.row_index if f.row_index is not None else -1, f.column or "", f.check))
        seen = BatchScan(rows, len(plan.drop) if plan else 0, rejected, tuple(failures), accepted)

    def restated(batch_ref: str, wanted: frozenset[Any]) -> Iterator[tuple[dt.date, pa.Table]]:
        return batch_rows(landing, spec, batch_ref, wanted, skip)

    filter_ = tables.partition_filter(spec, days)
    outcomes = tables.append_days(spec, chunks, recorded_at=first.recorded_at, batch=first.batch_ref, row_filter=filter_, restated=restated, branch=branch)
    if len(seen.accepted_days) < len(days):  # the rows were not read (every day held the batch already): count them for the report
        for _ in chunks():
            pass
    none = AppendOutcome(spec.name, tables.current_snapshot_id(spec) if branch is None else wap.branch_head(tables, spec, branch), 0, 0, False, 1)
    return {
        (r.day, r.batch_ref): BatchLoad(r, outcomes.get(r.day, none), seen.accepted_days.get(r.day, 0), seen.rejected, seen.duplicates_dropped, seen.failures)
        for r in records
    }


def _plan(opener: Opener, spec: SourceSpec, digest: str) -> BatchPlan | None:
    """The batch's plan: remembered from the check or the landing of these bytes in this process (scan_memo.py), else read; None: unreadable."""
    known = recall(digest, spec)
    if known is not None and known.plan is not None:
        return known.plan
    try:
        return plan_batch(opener, spec)
    except UnreadableBatch:  # a loadable batch was readable when it landed; nothing of it loads
        return None


def batch_rows(landing: LandingZone, spec: SourceSpec, batch_ref: str, days: Collection[Any], skip: Collection[str] = ()) -> Iterator[tuple[dt.date, pa.Table]]:
    """The accepted rows of the landed batch ``batch_ref`` that fall in ``days``, as ``(day, rows)``; none of a batch held back or unreadable."""
    record = next((r for r in landing.records(spec.name) if r.batch_ref == batch_ref and r.loadable and r.batch_ref not in skip), None)
    if record is None:
        return

    def opener() -> BinaryIO:
        return landing.open(record)

    plan = _plan(opener, spec, record.digest)
    if plan is None:
        return
    for good, _bad, _failures in validated_chunks(opener, spec, plan):
        for day in days:
            yield day, rows_of_day(good, spec, day)
