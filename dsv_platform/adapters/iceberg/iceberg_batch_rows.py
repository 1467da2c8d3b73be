"""A pinned snapshot's rows one raw batch at a time (the raw-agreement signal, docs/quarantine.md).

The snapshot's data files are planned once; a file's batches come from its ``_batch`` manifest bounds (equal
bounds name its one batch), else from the file itself (iceberg_batches.read_batches, failing closed). Each batch
then reads only its own files, filtered to its rows, through the table's current schema: memory follows one batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import ArrowScan

from dsv_platform.adapters.iceberg.iceberg_batches import BatchIndex
from dsv_platform.adapters.iceberg.iceberg_schema import equal
from dsv_platform.adapters.iceberg.iceberg_values import BATCH, table_schema
from dsv_platform.core.contracts.contract import Contract


def batch_tables(tbl: Any, contract: Contract, snapshot_id: int) -> Iterator[tuple[str, pa.Table]]:
    """``(batch, its stored rows)`` for every batch whose rows the snapshot holds, sorted by batch, under the table schema.

    The snapshot's files are planned once; each batch reads only its files (a file's batches from its ``_batch`` bounds,
    else from the file), so memory follows one batch. An older snapshot is read through the current schema (scan_arrow).
    """
    schema, current = table_schema(contract), tbl.schema()
    scan = tbl.scan(snapshot_id=snapshot_id)
    index, by_batch = BatchIndex(tbl), dict[str, list[Any]]()
    for task in scan.plan_files():
        for batch in _file_batches(index, task.file):
            by_batch.setdefault(batch, []).append(task)
    for batch in sorted(by_batch):
        reader = ArrowScan(tbl.metadata, tbl.io, current, equal(BATCH, batch), True, None)
        yield batch, reader.to_table(by_batch[batch]).select(schema.names).cast(schema)


def _file_batches(index: BatchIndex, data_file: Any) -> tuple[str, ...]:
    lower = (data_file.lower_bounds or {}).get(index.field_id) if index.field_id is not None else None
    if lower is not None and lower == (data_file.upper_bounds or {}).get(index.field_id):
        return (bytes(lower).decode("utf-8"),)
    index.files_read += 1
    return index.reader(index.tbl, data_file.file_path)


__all__ = ["batch_tables"]
