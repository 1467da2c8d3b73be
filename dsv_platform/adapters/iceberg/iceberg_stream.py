"""Streaming a canonical table's pinned snapshot as Arrow record batches, one data file at a time, never whole in memory.

A snapshot that lists one data file twice, or a file holding other than the rows its manifest entry counts, is
refused as CORRUPT naming the table and the file (a streamed append before 2026-12-02 could write such snapshots:
each record batch overwrote the file before it under the same name). :func:`batch_tables` gives a snapshot's rows
one raw batch at a time, each batch reading only its own files (the raw-agreement signal, docs/quarantine.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_batches import BatchIndex
from dsv_platform.adapters.iceberg.iceberg_schema import equal
from dsv_platform.adapters.iceberg.iceberg_values import BATCH, table_schema
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import CorruptError


def scan_batches(
    tables: CanonicalTables, spec: TableSpecLike, *, snapshot_id: int | None, row_filter: BooleanExpression | None = None
) -> pa.RecordBatchReader:
    """Every stored row of ``spec`` at ``snapshot_id`` (all versions, with ``_recorded_at`` and ``_batch``) under its table schema.

    ``row_filter`` (a partition's rows): only the files that may hold matching rows are read, and only those rows kept.
    """
    schema = table_schema(spec.contract)
    if not tables.exists(spec):
        return pa.RecordBatchReader.from_batches(schema, iter(()))
    tbl = tables.catalog.load_table(tables.identifier(spec))
    if snapshot_id is not None and tbl.snapshot_by_id(snapshot_id) is None:
        raise CanonicalTableError(f"table {tables.identifier(spec)} has no snapshot {snapshot_id} (expired?)")
    if snapshot_id is None and tbl.current_snapshot() is None:
        return pa.RecordBatchReader.from_batches(schema, iter(()))
    scan = tbl.scan(snapshot_id=snapshot_id, selected_fields=tuple(schema.names), row_filter=row_filter or AlwaysTrue())
    projected = scan.projection()
    reader = ArrowScan(scan.table_metadata, scan.io, projected, scan.row_filter, scan.case_sensitive, scan.limit)

    name, seen = tables.identifier(spec), set[str]()

    def cast() -> Iterator[pa.RecordBatch]:
        for task in scan.plan_files():  # one data file at a time: pyiceberg's own reader reads every file at once
            path, rows = task.file.file_path, 0
            if path in seen:
                raise CorruptError(f"table {name} snapshot {snapshot_id}: data file {path} is listed twice (rows of an append were overwritten)")
            seen.add(path)
            for batch in reader.to_record_batches([task]):
                rows += batch.num_rows
                if batch.num_rows:
                    yield from pa.Table.from_batches([batch]).select(schema.names).cast(schema).to_batches()
            if row_filter is None and not task.delete_files and rows != task.file.record_count:
                raise CorruptError(f"table {name} snapshot {snapshot_id}: data file {path} holds {rows} rows, its manifest counts {task.file.record_count}")

    return pa.RecordBatchReader.from_batches(schema, cast())


def batch_tables(tbl: Any, contract: Contract, snapshot_id: int) -> Iterator[tuple[str, pa.Table]]:
    """``(batch, its stored rows)`` for every batch whose rows the snapshot holds, sorted by batch, under the table schema.

    Each batch's rows whole: :func:`batch_readers` streams them instead.
    """
    for batch, reader in batch_readers(tbl, contract, snapshot_id):
        yield batch, reader.read_all()


def batch_readers(tbl: Any, contract: Contract, snapshot_id: int) -> Iterator[tuple[str, pa.RecordBatchReader]]:
    """``(batch, a reader of its stored rows)`` for every batch whose rows the snapshot holds, sorted by batch.

    The snapshot's files are planned once; each batch reads only its files (a file's batches from its ``_batch`` bounds,
    else from the file), one record batch at a time, so memory follows one record batch. An older snapshot is read
    through the current schema (scan_arrow).
    """
    schema, current = table_schema(contract), tbl.schema()
    scan = tbl.scan(snapshot_id=snapshot_id)
    index, by_batch = BatchIndex(tbl), dict[str, list[Any]]()
    for task in scan.plan_files():
        for batch in _file_batches(index, task.file):
            by_batch.setdefault(batch, []).append(task)
    for batch in sorted(by_batch):
        reader = ArrowScan(tbl.metadata, tbl.io, current, equal(BATCH, batch), True, None)

        def typed(tasks: list[Any] = by_batch[batch], scan: ArrowScan = reader) -> Iterator[pa.RecordBatch]:
            for task in tasks:  # one file at a time: ArrowScan reads the files it is given at once
                for record_batch in scan.to_record_batches([task]):
                    if record_batch.num_rows:
                        yield from pa.Table.from_batches([record_batch]).select(schema.names).cast(schema).to_batches()

        yield batch, pa.RecordBatchReader.from_batches(schema, typed())


def _file_batches(index: BatchIndex, data_file: Any) -> tuple[str, ...]:
    lower = (data_file.lower_bounds or {}).get(index.field_id) if index.field_id is not None else None
    if lower is not None and lower == (data_file.upper_bounds or {}).get(index.field_id):
        return (bytes(lower).decode("utf-8"),)
    index.files_read += 1
    return index.reader(index.tbl, data_file.file_path)


__all__ = ["batch_readers", "batch_tables", "local_files", "scan_batches"]


def local_files(
    tables: CanonicalTables, spec: TableSpecLike, *, snapshot_id: int | None, row_filter: BooleanExpression | None = None
) -> list[tuple[str, int]] | None:
    """``(local path, record count)`` of every data file a scan of ``spec`` reads, when the engine can read them as they are.

    That is: the table has only ever had one schema (its files' column names are the current ones), no file has delete
    files, and every file is on the local file system. Otherwise None: stream the rows instead (:func:`scan_batches`).
    A file listed twice is refused as CORRUPT, as :func:`scan_batches` refuses it.
    """
    if not tables.exists(spec):
        return None
    tbl = tables.catalog.load_table(tables.identifier(spec))
    if len(tbl.metadata.schemas) != 1 or (snapshot_id is None and tbl.current_snapshot() is None):
        return None
    if snapshot_id is not None and tbl.snapshot_by_id(snapshot_id) is None:
        raise CanonicalTableError(f"table {tables.identifier(spec)} has no snapshot {snapshot_id} (expired?)")
    files, seen = list[tuple[str, int]](), set[str]()
    for task in tbl.scan(snapshot_id=snapshot_id, row_filter=row_filter or AlwaysTrue()).plan_files():
        path = task.file.file_path
        if path in seen:
            raise CorruptError(f"table {tables.identifier(spec)} snapshot {snapshot_id}: data file {path} is listed twice (rows of an append were overwritten)")
        seen.add(path)
        local = unquote(urlparse(path).path) if path.startswith("file://") else path
        if task.delete_files or not local.startswith("/"):
            return None
        files.append((local, int(task.file.record_count)))
    for local, count in files:  # what scan_batches checks as it reads: a file holding other rows than its manifest counts
        stored = pq.ParquetFile(local).metadata.num_rows
        if stored != count:
            raise CorruptError(f"table {tables.identifier(spec)} snapshot {snapshot_id}: data file {local} holds {stored} rows, its manifest counts {count}")
    return files
