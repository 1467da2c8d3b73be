"""The content digest of one canonical partition as corrected now, in memory bounded by the build engine, not the partition.

After a load, each day's data version is the hash of its latest row per key. The day's stored rows (every version, with
``_recorded_at`` and ``_batch``) go into a scratch DuckDB database (the engine reads a local table's data files itself,
else they stream in one data file at a time); the engine keeps each key's
latest version (greatest ``_recorded_at``, then ``_batch``, as ``latest_per_key`` ranks them) and returns the rows in
natural-key order, which are hashed table by table (``hash_key_ordered``): the digest ``hash_table`` gives the whole day.
Without an engine (``DSV_BUILD_ENGINE=arrow``), for types the engine cannot carry exactly, or for a partition column that
is not a date (a timestamp's rows hash under one key each), the day is read and hashed in memory as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pyarrow as pa

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, engine_cursor, load, load_parquet
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_stream import local_files, scan_batches
from dsv_platform.adapters.iceberg.iceberg_values import table_schema
from dsv_platform.core.assembly.assembly_sql import BATCH, RECORDED_AT, quote, unsupported
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.identity.hashing import UNPARTITIONED_KEY, DatasetDigest, digest_of, hash_table, partition_keys
from dsv_platform.core.identity.streaming import hash_key_ordered

READ_ROWS = 1 << 17


def streamable(spec: TableSpecLike, limits: EngineLimits | None) -> bool:
    """Whether :func:`partition_digest` streams ``spec``'s partitions through the engine."""
    contract = spec.contract
    if limits is None or unsupported(contract.arrow_schema) is not None:
        return False
    return contract.partition_by is None or pa.types.is_date32(contract.arrow_schema.field(contract.partition_by).type)


def partition_digest(
    tables: CanonicalTables,
    spec: TableSpecLike,
    day: dt.date | None,
    limits: EngineLimits | None,
    *,
    read_files: bool = True,
    snapshot_id: int | None = None,
) -> DatasetDigest:
    """The digest of ``spec``'s partition ``day`` (every row of an unpartitioned table) as its latest row per key now.

    ``read_files``: let the engine read local data files itself (False: stream the rows in through pyiceberg, as for S3).
    ``snapshot_id``: at that snapshot (a load's staging branch head) instead of the current one.
    """
    contract = spec.contract
    if not streamable(spec, limits) or not tables.exists(spec):
        return hash_table(tables.read(spec, partition=day, snapshot_id=snapshot_id), contract, partition_by=contract.partition_by)
    assert limits is not None
    part = contract.partition_by
    row_filter = tables.partition_filter(spec, [day]) if part is not None and day is not None else None
    columns, key = ", ".join(quote(c) for c in contract.column_names), ", ".join(quote(k) for k in contract.key)
    sql = (
        f"SELECT {columns} FROM __day QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY {RECORDED_AT} DESC, {BATCH} DESC) = 1 "
        f"ORDER BY {key}"
    )
    with engine(limits) as con:
        files = local_files(tables, spec, snapshot_id=snapshot_id, row_filter=row_filter) if read_files else None
        if files is None:  # e.g. an S3 warehouse, or a table whose schema evolved: the rows stream in through pyiceberg
            load(con, "__day", scan_batches(tables, spec, snapshot_id=snapshot_id, row_filter=row_filter))
        else:  # the engine reads the day's data files itself (the table is partitioned by the day: they hold its rows only)
            where = f"{quote(part)} = DATE '{day.isoformat()}'" if part is not None and day is not None else None
            load_parquet(con, "__day", [path for path, _ in files], table_schema(contract), where=where)
        cursor = engine_cursor(con)
        try:
            tables_in_order = (pa.Table.from_batches([b]).cast(contract.arrow_schema) for b in cursor.sql(sql).to_arrow_reader(READ_ROWS))
            first = next(tables_in_order, None)
            if first is None:
                return digest_of([], contract)
            name = str(partition_keys(first.slice(0, 1), contract, part)[0]) if part is not None else UNPARTITIONED_KEY

            def chained(head: pa.Table) -> Iterator[pa.Table]:
                yield head
                yield from tables_in_order

            leaf = hash_key_ordered(chained(first), contract, key=name, source=tables.identifier(spec))
        finally:
            cursor.close()
    return digest_of([leaf], contract)
