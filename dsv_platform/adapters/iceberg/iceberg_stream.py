"""Streaming a canonical table's pinned snapshot as Arrow record batches, file by file, never whole in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from dsv_platform.adapters.iceberg.iceberg import CanonicalTableError, CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_values import table_schema
from dsv_platform.core.config.source import TableSpecLike


def scan_batches(tables: CanonicalTables, spec: TableSpecLike, *, snapshot_id: int | None) -> pa.RecordBatchReader:
    """Every stored row of ``spec`` at ``snapshot_id`` (all versions, with ``_recorded_at`` and ``_batch``) under its table schema."""
    schema = table_schema(spec.contract)
    if not tables.exists(spec):
        return pa.RecordBatchReader.from_batches(schema, iter(()))
    tbl = tables.catalog.load_table(tables.identifier(spec))
    if snapshot_id is not None and tbl.snapshot_by_id(snapshot_id) is None:
        raise CanonicalTableError(f"table {tables.identifier(spec)} has no snapshot {snapshot_id} (expired?)")
    if snapshot_id is None and tbl.current_snapshot() is None:
        return pa.RecordBatchReader.from_batches(schema, iter(()))
    reader = tbl.scan(snapshot_id=snapshot_id, selected_fields=tuple(schema.names)).to_arrow_batch_reader()

    def cast() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            if batch.num_rows:
                yield pa.Table.from_batches([batch]).select(schema.names).cast(schema).combine_chunks().to_batches()[0]

    return pa.RecordBatchReader.from_batches(schema, cast())


__all__ = ["scan_batches"]
