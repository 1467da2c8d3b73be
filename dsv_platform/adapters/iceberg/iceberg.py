"""Canonical tables on Apache Iceberg (the catalog pyiceberg loads, docs/iceberg.md): two clocks, append-only corrections, pins.

A correction or a late event is a new row, never a rewrite, so a table can be read as known at any time (``as_of``)
or as corrected now; appends are idempotent and retried on a lost commit race, and ``pin`` tags the snapshot a realization needs.

Details: docs/storage.md
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, NoSuchNamespaceError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.table import Table

from dsv_platform.adapters.iceberg.iceberg_catalog import build_catalog
from dsv_platform.adapters.iceberg.iceberg_files import FileLedger, head_of, seal_written, target_of
from dsv_platform.adapters.iceberg.iceberg_files import snapshot_id_of as _snapshot_id
from dsv_platform.adapters.iceberg.iceberg_history import snapshots_holding
from dsv_platform.adapters.iceberg.iceberg_hygiene import PIN_MAX_REF_AGE_MS, TABLE_PROPERTIES, upgraded
from dsv_platform.adapters.iceberg.iceberg_schema import DataFileWriter, equal, partition_filter, rows_filter, scan_arrow, where, with_sort_order
from dsv_platform.adapters.iceberg.iceberg_values import (
    BATCH,
    RECORDED_AT,
    AppendOutcome,
    PinnedSnapshot,
    RowDeletion,
    SnapshotInfo,
    append_state,
    batch_properties,
    changed_rows,
    latest_per_key,
    literal,
    restatements,
    stamped,
    table_schema,
)
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import DsvError
from dsv_platform.core.ingest.staging import STAGING_MAX_AGE_MS

NAMESPACE = "canonical"
COMMIT_ATTEMPTS = 8


class CanonicalTableError(DsvError):
    """A canonical table operation failed (commit retries exhausted, unknown snapshot or tag)."""


class CanonicalTables:
    """Canonical Iceberg tables in one catalog namespace, one per table spec (a source, a label version)."""

    def __init__(self, catalog: Catalog, *, namespace: str = NAMESPACE, commit_attempts: int = COMMIT_ATTEMPTS) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.commit_attempts = commit_attempts
        self.ledger: FileLedger | None = None  # the platform's: the digest of every data file a commit adds (iceberg_files.py)

    @classmethod
    def open(cls, catalog_url: str, warehouse: str, **options: Any) -> CanonicalTables:
        """The tables of the catalog :func:`build_catalog` loads (by default the SQL catalog at ``catalog_url`` over ``warehouse``)."""
        return cls(build_catalog(catalog_url, warehouse, **options))

    def identifier(self, spec: TableSpecLike) -> str:
        return f"{self.namespace}.{spec.name}"

    # -- tables ---------------------------------------------------------------
    def table(self, spec: TableSpecLike) -> Table:
        """The table of ``spec``, created if missing: partitioned by the contract's ``partition_by``, sorted by its key (iceberg_hygiene.py)."""
        ident = self.identifier(spec)
        try:
            return self.catalog.load_table(ident)
        except NoSuchTableError:
            pass
        with contextlib.suppress(NamespaceAlreadyExistsError):
            self.catalog.create_namespace(self.namespace)
        try:
            with self.catalog.create_table_transaction(ident, schema=table_schema(spec.contract), properties=TABLE_PROPERTIES) as txn:
                if spec.contract.partition_by:
                    with txn.update_spec() as update:
                        update.add_identity(spec.contract.partition_by)
                with_sort_order(txn, spec.contract)
        except (TableAlreadyExistsError, CommitFailedException):
            pass  # another writer created it first
        return self.catalog.load_table(ident)

    def exists(self, spec: TableSpecLike) -> bool:
        return bool(self.catalog.table_exists(self.identifier(spec)))

    def table_names(self) -> list[str]:
        """Names of the tables in the namespace (none before the first table is created)."""
        try:
            return [i[-1] if isinstance(i, tuple) else str(i).split(".")[-1] for i in self.catalog.list_tables(self.namespace)]
        except NoSuchNamespaceError:
            return []

    def load(self, name: str) -> Table:
        """An existing table by name (maintenance: iceberg_maintenance.py)."""
        return self.catalog.load_table(f"{self.namespace}.{name}")

    def count_matching(self, spec: TableSpecLike, column: str, value: object) -> int:
        """Rows of the current snapshot whose ``column`` equals ``value`` (0 for a missing or empty table)."""
        if not self.exists(spec):
            return 0
        tbl = self.catalog.load_table(self.identifier(spec))
        if tbl.current_snapshot() is None:
            return 0
        return int(tbl.scan(row_filter=equal(column, value), selected_fields=(column,)).to_arrow().num_rows)

    # -- writes ---------------------------------------------------------------
    def append(self, spec: TableSpecLike, rows: pa.Table, *, recorded_at: dt.datetime, batch: str) -> AppendOutcome:
        """Append ``rows`` (contract columns) learned at ``recorded_at`` from ``batch``; idempotent, retried."""
        contract = spec.contract
        rows = rows.select(contract.column_names).cast(contract.arrow_schema)
        row_filter = rows_filter(contract, rows)
        return self.append_days(spec, lambda: [(None, rows)], recorded_at=recorded_at, batch=batch, row_filter=row_filter, by_day=False)[None]

    def append_days(
        self,
        spec: TableSpecLike,
        chunks: Callable[[], Iterable[tuple[Any, pa.Table]]],
        *,
        recorded_at: dt.datetime,
        batch: str,
        row_filter: BooleanExpression,
        by_day: bool = True,
        each_partition: bool = False,
        restated: Callable[[str, frozenset[Any]], Iterable[tuple[Any, pa.Table]]] | None = None,
        branch: str | None = None,
    ) -> dict[Any, AppendOutcome]:
        """:meth:`append` of rows given a record batch at a time, as ``(day, rows)`` (``chunks()`` gives them anew on each attempt).

        One snapshot, one outcome per day; ``row_filter`` names the partitions the rows fall in. ``by_day``: a day that holds
        the batch already is skipped, a row equal to its key's version in its day in effect at the batch's recorded time is
        not appended (else the same over all of ``row_filter``, day None). ``each_partition``: each chunk is one whole
        partition, read from the table when it comes. ``restated(batch, days)`` gives a later-recorded batch's rows again:
        those it skipped in a day this append changes are written in the same snapshot (docs/storage.md). The snapshot
        summary names the batch (``dsv.batches``); ``_batch`` keeps whole manifest bounds (iceberg_batches.py). ``branch``:
        the snapshot goes to that branch, read and moved in place of main (a load's staging branch, iceberg_wap.py)."""
        if recorded_at.tzinfo is None:
            raise CanonicalTableError(f"recorded_at must be timezone-aware, got {recorded_at!r}")
        contract, tbl = spec.contract, self._writable(spec)
        for attempt in range(1, self.commit_attempts + 1):
            before = head_of(tbl, branch)  # main's current snapshot without a branch
            scanned = table_schema(contract).empty_table() if each_partition else self._scan(tbl, contract, row_filter, before)
            state = append_state(scanned, contract, batch, recorded_at, by_day=by_day)
            applied, latest = set(state.applied), state.latest
            txn, seen, new, restates = tbl.transaction(), dict[Any, int](), dict[Any, int](), 0
            txn = upgraded(txn, tbl, contract)  # a table made before the hygiene properties gets them now (no data rewritten)
            with txn.update_snapshot(snapshot_properties=batch_properties(batch), branch=target_of(tbl, branch)).fast_append() as files:
                write = DataFileWriter(txn, files, tbl, CanonicalTableError)
                for day, chunk in chunks():
                    if each_partition:  # this partition's rows only: memory bounded by the largest partition
                        part = append_state(self._scan(tbl, contract, self.partition_filter(spec, [day]), before), contract, batch, recorded_at, by_day=False)
                        applied, latest = applied | ({day} if part.applied else set()), part.latest
                    if day in applied or (None in applied and contract.partition_by is None):  # unpartitioned: its one partition
                        continue
                    fresh = changed_rows(chunk.select(contract.column_names).cast(contract.arrow_schema), latest, contract)
                    seen[day], new[day] = seen.get(day, 0) + chunk.num_rows, new.get(day, 0) + fresh.num_rows
                    if fresh.num_rows:
                        write(stamped(fresh, recorded_at, batch))
                changed = [day for day, n in new.items() if n]
                for rows in restatements(state, changed, restated, contract) if restated is not None and changed else ():
                    restates += rows.num_rows
                    write(rows)
            if sum(new.values()):  # else nothing was written: the transaction is dropped uncommitted
                try:
                    txn.commit_transaction()
                except CommitFailedException:
                    time.sleep(0.05 * attempt)
                    tbl = self.catalog.load_table(self.identifier(spec))
                    continue
                self._sealed(spec, tbl, branch, before, files.snapshot_id)
            sid = head_of(tbl, branch)
            done = {day: AppendOutcome(spec.name, sid, 0, 0, True, attempt) for day in applied}
            return done | {day: AppendOutcome(spec.name, sid, new[day], seen[day] - new[day], False, attempt, restates) for day in seen}
        raise CanonicalTableError(f"append to {self.identifier(spec)} lost {self.commit_attempts} commit races in a row; retry the run")

    def _ready(self) -> None:
        """Before a commit: the ledger can sign what it adds (it proves who writes), so no commit lands that it could not record."""
        if self.ledger is not None:
            self.ledger.ready()

    def _writable(self, spec: TableSpecLike) -> Table:
        """The table of ``spec`` for an append (created if missing), once the ledger is :meth:`_ready`."""
        self._ready()
        return self.table(spec)

    def _sealed(self, spec: TableSpecLike, tbl: Table, branch: str | None, before: int | None, made: int) -> None:
        """After an append's commit: the snapshot staged on a table without one gets its branch; the files it added are sealed."""
        if branch is not None and branch not in tbl.refs():  # pyiceberg writes only main on a table without a snapshot
            with contextlib.suppress(CommitFailedException):  # a load of the same batches made it first: its publish sees that
                tbl.manage_snapshots().create_branch(made, branch, max_ref_age_ms=STAGING_MAX_AGE_MS).commit()
        seal_written(self.ledger, spec.name, tbl, before=before, head=made)

    # -- row-level deletes (privacy) ----------------------------------------------
    def delete_rows(self, spec: TableSpecLike, delete_filter: BooleanExpression | tuple[str, object]) -> RowDeletion:
        """Remove the rows matching ``delete_filter`` from the current snapshot (copy-on-write); retried, idempotent.

        The new current snapshot no longer holds them; older snapshots still do
        until they are expired (see :meth:`snapshots_matching` and :meth:`expire`).
        """
        delete_filter = where(delete_filter)
        if not self.exists(spec):
            return RowDeletion(spec.name, None, None, 0, ())
        tbl = self.catalog.load_table(self.identifier(spec))
        self._ready()
        for attempt in range(1, self.commit_attempts + 1):
            before = _snapshot_id(tbl)
            if before is None:
                return RowDeletion(spec.name, None, None, 0, ())
            hits = tbl.scan(row_filter=delete_filter).to_arrow()
            if hits.num_rows == 0:
                return RowDeletion(spec.name, before, before, 0, ())
            part = spec.contract.partition_by
            partitions = tuple(sorted({str(v) for v in hits.column(part).to_pylist()})) if part else ()
            try:
                tbl.delete(delete_filter=delete_filter)
            except CommitFailedException:
                time.sleep(0.05 * attempt)
                tbl = self.catalog.load_table(self.identifier(spec))
                continue
            seal_written(self.ledger, spec.name, tbl, before=before)  # the rewritten files
            return RowDeletion(spec.name, before, _snapshot_id(tbl), hits.num_rows, partitions)
        raise CanonicalTableError(f"deleting rows of {self.identifier(spec)} lost {self.commit_attempts} commit races in a row; retry the run")

    def drop_deleted_manifests(self, spec: TableSpecLike) -> int | None:
        """Commit the current snapshot again without its manifests of only DELETED entries (they keep removed files' column bounds).

        Returns the snapshot replaced (for the caller to expire), or None when there was nothing to drop.
        """
        for attempt in range(1, self.commit_attempts + 1):
            tbl = self.catalog.load_table(self.identifier(spec))
            snap = tbl.current_snapshot()
            if snap is None or all(m.has_added_files() or m.has_existing_files() for m in snap.manifests(tbl.io)):
                return None
            try:
                with tbl.transaction() as txn, txn.update_snapshot().fast_append():  # no files: the parent's manifests less the DELETED-only ones
                    pass
            except CommitFailedException:
                time.sleep(0.05 * attempt)
                continue
            return int(snap.snapshot_id)
        raise CanonicalTableError(f"rewriting the manifests of {self.identifier(spec)} lost {self.commit_attempts} commit races in a row")

    def snapshots_matching(self, spec: TableSpecLike, row_filter: BooleanExpression | tuple[str, object]) -> list[int]:
        """Ids of the snapshots (the current one included) that still hold a row matching ``row_filter`` (an expression or ``(column, value)``)."""
        row_filter = where(row_filter)
        if not self.exists(spec):
            return []
        return snapshots_holding(self.catalog.load_table(self.identifier(spec)), row_filter)  # each manifest and file read once

    def remove_tags(self, spec: TableSpecLike, tags: list[str]) -> list[str]:
        """Remove these tags (those still present); returns the ones removed."""
        for attempt in range(1, self.commit_attempts + 1):
            tbl = self.catalog.load_table(self.identifier(spec))
            present = [t for t in sorted(set(tags)) if t in self.tags(spec)]
            if not present:
                return []
            manage = tbl.manage_snapshots()
            for t in present:
                manage = manage.remove_tag(t)
            try:
                manage.commit()
            except CommitFailedException:
                time.sleep(0.05 * attempt)
                continue
            return present
        raise CanonicalTableError(f"removing tags of {self.identifier(spec)} lost {self.commit_attempts} commit races in a row")

    def expire(self, spec: TableSpecLike, snapshot_ids: list[int]) -> list[int]:
        """Expire these snapshots, skipping the current one and any a tag or branch protects; returns the ones expired.

        Their data files stay on storage until GC removes files no live snapshot references.
        """
        for attempt in range(1, self.commit_attempts + 1):
            tbl = self.catalog.load_table(self.identifier(spec))
            protected = {ref.snapshot_id for ref in tbl.refs().values()}
            todo = sorted(i for i in set(snapshot_ids) if i not in protected and tbl.snapshot_by_id(i) is not None)
            if not todo:
                return []
            try:
                tbl.maintenance.expire_snapshots().by_ids(todo).commit()
            except CommitFailedException:
                time.sleep(0.05 * attempt)
                continue
            return todo
        raise CanonicalTableError(f"expiring snapshots of {self.identifier(spec)} lost {self.commit_attempts} commit races in a row")

    # -- reads ----------------------------------------------------------------
    def read(
        self,
        spec: TableSpecLike,
        *,
        partition: object | None = None,
        as_of: dt.datetime | None = None,
        snapshot_id: int | None = None,
        history: bool = False,
        exclude_batches: Collection[str] = (),
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """Contract rows of ``spec`` (one partition value, or all), latest per key.

        ``as_of`` keeps only rows recorded at or before it ("as known at T");
        ``snapshot_id`` reads a pinned snapshot; ``history`` returns every
        version with the system columns instead of the latest per key;
        ``exclude_batches`` leaves out the rows those batches wrote (quarantined raw batches);
        ``columns`` (with ``history``) reads only those columns, plus the key and the two system columns.
        """
        contract = spec.contract
        if not self.exists(spec):
            return contract.arrow_schema.empty_table() if not history else table_schema(contract).empty_table()
        tbl = self.catalog.load_table(self.identifier(spec))
        if snapshot_id is not None and tbl.snapshot_by_id(snapshot_id) is None:
            raise CanonicalTableError(f"table {self.identifier(spec)} has no snapshot {snapshot_id} (expired?)")
        row_filter: BooleanExpression = AlwaysTrue()
        if partition is not None and contract.partition_by:
            row_filter = equal(contract.partition_by, literal(partition))
        wanted = None if columns is None or not history else [*dict.fromkeys([*contract.key, *columns, RECORDED_AT, BATCH])]
        rows = self._scan(tbl, contract, row_filter, snapshot_id, wanted)
        if exclude_batches:
            rows = rows.filter(pc.invert(pc.is_in(rows.column(BATCH), value_set=pa.array(sorted(exclude_batches), pa.string()))))
        if as_of is not None:
            rows = rows.filter(pc.less_equal(rows.column(RECORDED_AT), pa.scalar(as_of, pa.timestamp("us", tz="UTC"))))
        if history:
            return rows.sort_by([(RECORDED_AT, "ascending"), (BATCH, "ascending"), *[(k, "ascending") for k in contract.key]])
        return latest_per_key(rows, contract.key).select(contract.column_names).cast(contract.arrow_schema)

    @staticmethod
    def _scan(tbl: Table, contract: Contract, row_filter: BooleanExpression, snapshot_id: int | None, columns: Sequence[str] | None = None) -> pa.Table:
        schema = table_schema(contract)
        if columns is not None:
            schema = pa.schema([schema.field(name) for name in columns])
        if snapshot_id is None and tbl.current_snapshot() is None:
            return schema.empty_table()
        selected = ("*",) if columns is None else tuple(columns)
        arrow = scan_arrow(tbl, row_filter, snapshot_id, selected)  # an older snapshot through the current schema (iceberg_schema.py)
        return arrow.select(schema.names).cast(schema)

    partition_filter = staticmethod(partition_filter)  # the rows of these partitions (iceberg_schema.py)

    # -- snapshots and tags ---------------------------------------------------
    def current_snapshot_id(self, spec: TableSpecLike) -> int | None:
        return _snapshot_id(self.table(spec))

    def snapshot_parent(self, spec: TableSpecLike, snapshot_id: int) -> int | None:
        """The parent of ``snapshot_id`` from the table metadata (None for the first snapshot or an unknown id)."""
        snap = self.table(spec).snapshot_by_id(snapshot_id)
        return None if snap is None else snap.parent_snapshot_id

    def pin(self, spec: TableSpecLike, tag: str, *, snapshot_id: int | None = None) -> PinnedSnapshot:
        """Tag ``snapshot_id`` (default: the current snapshot) as ``tag``; re-pinning the same pair is a no-op."""
        tbl = self.table(spec)
        target = snapshot_id if snapshot_id is not None else _snapshot_id(tbl)
        if target is None:
            raise CanonicalTableError(f"table {self.identifier(spec)} has no snapshot to pin: materialize it first")
        for attempt in range(1, self.commit_attempts + 1):
            existing = tbl.refs().get(tag)
            if existing is not None:
                if existing.snapshot_id != target:
                    raise CanonicalTableError(f"tag {tag!r} on {self.identifier(spec)} already pins snapshot {existing.snapshot_id}, not {target}")
                return PinnedSnapshot(spec.name, target, tag)
            try:
                tbl.manage_snapshots().create_tag(target, tag, max_ref_age_ms=PIN_MAX_REF_AGE_MS).commit()
            except CommitFailedException:
                time.sleep(0.05 * attempt)
                tbl = self.catalog.load_table(self.identifier(spec))
                continue
            return PinnedSnapshot(spec.name, target, tag)
        raise CanonicalTableError(f"tagging {self.identifier(spec)} lost {self.commit_attempts} commit races in a row")

    def tags(self, spec: TableSpecLike) -> dict[str, int]:
        """Tag name -> snapshot id (branches such as ``main`` left out)."""
        refs = self.table(spec).refs()
        return {name: ref.snapshot_id for name, ref in sorted(refs.items()) if str(ref.snapshot_ref_type) == "tag"}

    def snapshots(self, spec: TableSpecLike) -> list[SnapshotInfo]:
        tbl = self.table(spec)
        by_snapshot: dict[int, list[str]] = {}
        for name, sid in self.tags(spec).items():
            by_snapshot.setdefault(sid, []).append(name)
        return [
            SnapshotInfo(
                snapshot_id=s.snapshot_id,
                parent_id=s.parent_snapshot_id,
                timestamp_ms=s.timestamp_ms,
                operation=s.summary.operation.value if s.summary is not None else None,
                tags=tuple(sorted(by_snapshot.get(s.snapshot_id, []))),
            )
            for s in tbl.snapshots()
        ]
