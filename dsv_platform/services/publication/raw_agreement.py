"""The ``integrity:raw_agreement`` signal at build: every batch of the pinned source snapshots against its landed raw batch.

Per source and per batch its pinned snapshot holds, the canonical rows of that batch are compared with the batch's
accepted rows derived again from the raw bytes (core/identity/raw_agreement.py). With the build engine both sides
stream into a scratch DuckDB database and are hashed in key order as it sorts them, so memory follows neither the
batch nor the table; a batch of at most ``IN_MEMORY_ROWS`` canonical rows is compared in memory (the same result, without
the engine's load and sort of two tables per batch: most of a small build's time went there). Details: docs/quarantine.md
("raw_agreement").
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from dsv_platform.adapters.engine.duckdb_engine import engine, engine_cursor, limits_of, load
from dsv_platform.adapters.iceberg.iceberg_stream import batch_readers
from dsv_platform.adapters.objects.landing import LandingRecord
from dsv_platform.core.assembly.assembly_sql import quote, unsupported
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.contracts import integrity_signals as sig
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import ContractViolationError, ObjectErasedError, ObjectNotFoundError, ObjectVerificationError
from dsv_platform.core.identity.raw_agreement import BatchAgreement, compare_batch
from dsv_platform.core.identity.streaming import hash_key_ordered
from dsv_platform.core.ingest.batch_stream import plan_batch, validated_chunks
from dsv_platform.core.ingest.landing_stream import UnreadableBatch
from dsv_platform.core.ingest.scan_memo import recall
from dsv_platform.core.publication.gates import GateResult

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection
    from dsv_platform.bootstrap import Platform
    from dsv_platform.services.publication.realization_inputs import Pin


def _raw_rows(platform: Platform, spec: SourceSpec, record: LandingRecord) -> Iterator[pa.Table]:
    """The accepted rows of a landed batch, a record batch at a time (UnreadableBatch, Object*Error propagate)."""

    def opener() -> BinaryIO:
        return platform.landing.open(record)

    known = recall(record.digest, spec)
    plan = known.plan if known is not None and known.plan is not None else plan_batch(opener, spec)
    for accepted, _rejected, _failures in validated_chunks(opener, spec, plan):
        yield accepted


READ_ROWS = 1 << 17
IN_MEMORY_ROWS = 1 << 16
"""A batch with at most this many canonical rows is compared in memory (compare_batch holds them and the raw rows matching them)."""


def _ordered_hash(con: Connection, sql: str, contract: Contract, source: str) -> tuple[int, str]:
    """Rows and hash of ``sql``'s rows (contract columns, in key order), read a table at a time; "unhashable: ..." as compare_batch says."""
    cursor = engine_cursor(con)
    try:
        tables = (pa.Table.from_batches([b]).cast(contract.arrow_schema) for b in cursor.sql(sql).to_arrow_reader(READ_ROWS))
        leaf = hash_key_ordered(tables, contract, source=source)
        return leaf.rows, leaf.hash
    except ContractViolationError as exc:  # e.g. a key twice among the canonical rows: no batch writes a key twice
        counted = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()
        return int(counted[0]) if counted else 0, f"unhashable: {exc}"
    finally:
        cursor.close()


def _typed(contract: Contract, tables: Iterator[pa.Table | pa.RecordBatch] | pa.RecordBatchReader) -> pa.RecordBatchReader:
    names, schema = list(contract.column_names), contract.arrow_schema

    def batches() -> Iterator[pa.RecordBatch]:
        for t in tables:
            table = t if isinstance(t, pa.Table) else pa.Table.from_batches([t])
            yield from table.select(names).cast(schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def compare_in_engine(con: Connection, source: str, batch: str, contract: Contract, canonical_rows: int, raw_chunks: Iterator[pa.Table]) -> BatchAgreement:
    """:func:`compare_batch` with the canonical rows in the engine's ``__canonical`` and the raw rows streamed in beside them.

    The same result, in memory bounded by the engine: each side is hashed in key order as the engine sorts it.
    """
    load(con, "__raw", _typed(contract, raw_chunks))
    columns, key = ", ".join(f"r.{quote(c)}" for c in contract.column_names), ", ".join(quote(k) for k in contract.key)
    _, canonical_hash = _ordered_hash(con, f"SELECT * FROM __canonical ORDER BY {key}", contract, source)
    matched = f"SELECT {columns} FROM __raw r SEMI JOIN __canonical c USING ({key})"
    raw_n, raw_hash = _ordered_hash(con, f"{matched} ORDER BY {key}", contract, source)
    result = BatchAgreement(source, batch, canonical_rows, raw_n, canonical_hash=canonical_hash, raw_hash=raw_hash)
    if result.agrees:
        return result
    schema = contract.arrow_schema  # a disagreement: read back whole to name the columns that differ (rare, and an alarm)
    canonical = con.sql("SELECT * FROM __canonical").to_arrow_table().cast(schema)
    return compare_batch(source, batch, contract, canonical, iter([con.sql(matched).to_arrow_table().cast(schema)]))


def compare_source(
    platform: Platform, spec: SourceSpec, snapshot_id: int, *, held: Collection[str] = (), in_memory_rows: int = IN_MEMORY_ROWS
) -> list[BatchAgreement]:
    """:func:`compare_batch` of every batch (but ``held``) whose rows the snapshot ``snapshot_id`` of ``spec`` holds.

    With the build engine, in a scratch database of its own: its limits, its spill folder, removed afterwards; a batch of
    at most ``in_memory_rows`` canonical rows is compared in memory (the same result).
    """
    limits = limits_of(platform.settings)
    if limits is None or unsupported(spec.contract.arrow_schema) is not None:
        return _compare_source(platform, spec, snapshot_id, held, None, in_memory_rows)
    with engine(limits) as con:
        return _compare_source(platform, spec, snapshot_id, held, con, in_memory_rows)


def _first_rows(reader: pa.RecordBatchReader, limit: int) -> tuple[list[pa.RecordBatch], bool]:
    """Record batches from ``reader`` until more than ``limit`` rows were read or it ended; True when it ended within ``limit``."""
    read, rows = list[pa.RecordBatch](), 0
    for batch in reader:
        read.append(batch)
        rows += batch.num_rows
        if rows > limit:
            return read, False
    return read, True


def _compare_source(
    platform: Platform, spec: SourceSpec, snapshot_id: int, held: Collection[str], con: Connection | None, in_memory_rows: int
) -> list[BatchAgreement]:
    tbl = platform.tables.table(spec)
    records: dict[str, LandingRecord] = {}
    for r in platform.landing.records(spec.name):
        records.setdefault(r.batch_ref, r)
    out = []
    for batch, reader in batch_readers(tbl, spec.contract, snapshot_id):
        if batch in held:
            continue
        try:
            canonical: pa.Table | None = None
            if con is None:
                canonical = reader.read_all()
            else:
                first, small = _first_rows(reader, in_memory_rows)
                if small:
                    canonical = pa.Table.from_batches(first, schema=reader.schema)
                else:
                    load(con, "__canonical", _typed(spec.contract, itertools.chain(first, reader)))
            if canonical is not None:
                n = canonical.num_rows
            else:
                counted = con.execute("SELECT count(*) FROM __canonical").fetchone() if con is not None else None
                n = int(counted[0]) if counted else 0
            out.append(_agreement(platform, spec, batch, records.get(batch), n, canonical, con))
        finally:
            if con is not None:
                con.execute("DROP TABLE IF EXISTS __canonical; DROP TABLE IF EXISTS __raw")
    return out


def _agreement(
    platform: Platform, spec: SourceSpec, batch: str, record: LandingRecord | None, n: int, canonical: pa.Table | None, con: Connection | None
) -> BatchAgreement:
    """One batch's agreement: its canonical rows (``canonical``, or the engine's ``__canonical``) against its raw batch."""
    if record is None:
        return BatchAgreement(spec.name, batch, n, problem="no raw batch of this source landed under this ref")
    if record.redacted:
        return BatchAgreement(spec.name, batch, n, unverified="its raw object was erased by a privacy deletion")
    if not record.loadable:
        return BatchAgreement(spec.name, batch, n, problem=f"its raw batch is {record.status.value}, never loadable")
    try:
        if canonical is not None or con is None:
            return compare_batch(spec.name, batch, spec.contract, canonical if canonical is not None else spec.contract.arrow_schema.empty_table(),
                                 _raw_rows(platform, spec, record))  # fmt: skip
        return compare_in_engine(con, spec.name, batch, spec.contract, n, _raw_rows(platform, spec, record))
    except ObjectErasedError:
        return BatchAgreement(spec.name, batch, n, unverified="its raw object was erased by a privacy deletion")
    except (ObjectNotFoundError, ObjectVerificationError) as exc:
        return BatchAgreement(spec.name, batch, n, problem=f"its raw object cannot be read as landed ({exc})")
    except UnreadableBatch as exc:  # e.g. a contract changed since in a way the old bytes do not read under
        return BatchAgreement(spec.name, batch, n, unverified=f"its raw batch does not read under the current contract ({exc})")


def raw_agreement_gate(platform: Platform, definition: DatasetDefinition, pins: Mapping[str, Pin], *, held: Collection[str] = ()) -> GateResult:
    """The ``integrity:raw_agreement`` gate of a build of ``definition`` over its pinned sources (``pins``: table -> pin)."""
    policy = sig.parse_integrity(definition.document.get("integrity"), file=str(definition.contract.source or definition.ref))
    started, results = time.monotonic(), list[BatchAgreement]()
    if policy.raw_agreement:
        for name in definition.sources:
            spec = platform.config.sources.get(name)
            if spec is not None and name in pins:
                results += compare_source(platform, spec, pins[name].snapshot_id, held=held)
    disagreeing = [r for r in results if not r.agrees]
    columns = {f"{r.source}.{c}" for r in disagreeing for c in r.columns}
    unverified = [f"{r.source}:{r.batch}: {r.unverified}" for r in results if r.unverified is not None]
    rows = sum(r.canonical_rows for r in results)
    return sig.raw_agreement(policy, len(results), rows, [r.describe() for r in disagreeing], columns, unverified, time.monotonic() - started)


__all__ = ["compare_source", "raw_agreement_gate"]
