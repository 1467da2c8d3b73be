"""The examples of a realization assembled out of core: pinned scans streamed into DuckDB, the joins there.

Used for every definition the engine carries exactly (no derived columns or aggregation, no
nanosecond timestamps); the others, and ``DSV_BUILD_ENGINE=arrow``, take the in-memory
assembly of :mod:`dsv_platform.core.assembly.assembly`. Both give the same rows (the
differential tests), so the content hash does not depend on the engine.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, limits_of, load, load_parquet, load_table
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_stream import local_files, scan_batches
from dsv_platform.adapters.iceberg.iceberg_values import table_schema
from dsv_platform.core.assembly.assembly import AssemblyError
from dsv_platform.core.assembly.assembly_sql import latest_sql, plan_assembly, quote, unsupported, versions_sql
from dsv_platform.core.config.aggregation import ZoneOf
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.source import SourceSpec, TableSpecLike
from dsv_platform.core.config.timezones import zone
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.services.publication.examples import EngineExamples

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection
    from dsv_platform.bootstrap import Platform


def engine_limits(platform: Platform) -> EngineLimits | None:
    """The engine's limits from ``DSV_BUILD_MEMORY`` (spilling under ``home/spill``); None under ``DSV_BUILD_ENGINE=arrow``."""
    return limits_of(platform.settings)


def engine_refusal(definition: DatasetDefinition, specs: Collection[TableSpecLike]) -> str | None:
    """Why ``definition`` takes the in-memory assembly (None: it runs out of core)."""
    if definition.derive or definition.aggregate is not None:
        return "derived columns and aggregations run in memory"
    for schema in [definition.contract.arrow_schema, *(s.contract.arrow_schema for s in specs)]:
        if (why := unsupported(schema)) is not None:
            return why
    return None


@contextmanager
def examples_out_of_core(
    tables: CanonicalTables,
    definition: DatasetDefinition,
    inputs: Mapping[str, SourceSpec],
    snapshots: Mapping[str, int],
    watermark: dt.datetime,
    *,
    label: TableSpecLike | None = None,
    label_key: tuple[str, ...] | None = None,
    limits: EngineLimits | None = None,
    zone_of: ZoneOf = zone,
    exclude_batches: Collection[str] = (),
    progress: Progress = SILENT,
) -> Iterator[tuple[EngineExamples, int]]:
    """The examples (contract columns) left in the engine, read per partition, and the population before the label join, for the block.

    ``inputs`` are the base and joined sources by name, ``label`` the label version's table;
    ``snapshots`` the pinned snapshot of each (by table name).
    ``progress``: the stages ``read inputs`` (every input row streamed into the engine) and ``assemble`` (the examples).
    """
    with engine(limits or EngineLimits()) as con:
        excluding = None
        if exclude_batches:
            load_table(con, "__excluded", pa.table({"batch": pa.array(sorted(exclude_batches), pa.string())}))
            excluding = "__excluded"
        named = dict(inputs) | ({"__labels": label} if label is not None else {})
        known = known_at_sources(definition)
        progress.stage("read inputs")
        for i, spec in enumerate(named.values()):
            _load_snapshot(con, f"__raw{i}", tables, spec, snapshots[spec.name], progress)
            latest = latest_sql(f"__raw{i}", spec.contract.key, spec.contract.column_names, watermark, excluding=excluding)
            con.execute(f"CREATE TABLE __in{i} AS {latest}")
            if spec.name in known:  # a join as known at the example time reads every version (core/assembly/known_at.py)
                con.execute(f"CREATE TABLE __versions{i} AS {versions_sql(f'__raw{i}', spec.contract.column_names, watermark, excluding=excluding)}")
            con.execute(f"DROP TABLE __raw{i}")
        names = {name: f"__in{i}" for i, name in enumerate(named)}
        versions = {name: f"__versions{i}" for i, name in enumerate(named) if name in known}
        schemas = {n: s.contract.arrow_schema for n, s in named.items()}
        progress.stage("assemble")
        examples, population = _run_plan(con, definition, inputs, names, schemas, label_key=label_key, zone_of=zone_of, versions=versions)
        progress.advance(examples.num_rows)
        progress.done()
        yield examples, population


def _load_snapshot(con: Connection, name: str, tables: CanonicalTables, spec: TableSpecLike, snapshot_id: int, progress: Progress) -> None:
    """Every stored row of ``spec`` at ``snapshot_id`` into table ``name``: the engine reads local data files itself, else rows stream in."""
    files = local_files(tables, spec, snapshot_id=snapshot_id)
    if files is None:
        load(con, name, counted(scan_batches(tables, spec, snapshot_id=snapshot_id), progress))
        return
    load_parquet(con, name, [path for path, _ in files], table_schema(spec.contract))
    progress.advance(sum(rows for _, rows in files))


def counted(batches: pa.RecordBatchReader, progress: Progress) -> pa.RecordBatchReader:
    """``batches``, each one's rows reported to ``progress`` as it is read."""

    def each() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            progress.advance(batch.num_rows)
            yield batch

    return pa.RecordBatchReader.from_batches(batches.schema, each())


def known_at_sources(definition: DatasetDefinition) -> frozenset[str]:
    """The sources some join reads ``as_known_at`` (their versions, not only their latest rows)."""
    return frozenset(j.source for j in definition.as_of_joins if j.known_at is not None)


def assemble_tables(
    definition: DatasetDefinition,
    base: pa.Table,
    joined: Mapping[str, pa.Table],
    specs: Mapping[str, SourceSpec],
    labels: pa.Table | None,
    *,
    label_key: tuple[str, ...] | None = None,
    limits: EngineLimits | None = None,
    zone_of: ZoneOf = zone,
    versions: Mapping[str, pa.Table] | None = None,
) -> tuple[pa.Table, int]:
    """:func:`dsv_platform.core.assembly.assembly.assemble_examples` out of core, over tables already latest per key (and ``versions``)."""
    named = {definition.base: base, **joined, **({"__labels": labels} if labels is not None else {})}
    with engine(limits or EngineLimits()) as con:
        for i, table in enumerate(named.values()):
            load_table(con, f"__in{i}", table)
        for i, table in enumerate((versions or {}).values()):
            load_table(con, f"__versions{i}", table)
        names = {name: f"__in{i}" for i, name in enumerate(named)}
        tables = {name: f"__versions{i}" for i, name in enumerate(versions or {})}
        sources = {n: specs[n] for n in [*named, *(versions or {})] if n != "__labels"}
        schemas = {n: t.schema for n, t in {**(versions or {}), **named}.items()}
        examples, population = _run_plan(con, definition, sources, names, schemas, label_key=label_key, zone_of=zone_of, versions=tables)
        return _sorted(examples.whole(), definition), population


def _run_plan(
    con: Connection,
    definition: DatasetDefinition,
    sources: Mapping[str, SourceSpec],
    names: Mapping[str, str],
    schemas: Mapping[str, pa.Schema],
    *,
    label_key: tuple[str, ...] | None,
    zone_of: ZoneOf,
    versions: Mapping[str, str] | None = None,
) -> tuple[EngineExamples, int]:
    """Run :func:`plan_assembly` over the ``names`` tables (each input's latest rows, of ``schemas``)."""
    population = definition.population_filter
    if population is not None:
        kind = schemas[definition.base].field(population.column).type
        load_table(con, "__population", pa.table({"v": pc.cast(pa.array(population.values, pa.string()), kind)}))
    labels = schemas.get("__labels")
    plan = plan_assembly(
        definition, sources, names, schemas, label_key=label_key, label_columns=labels.names if labels is not None else (), zone_of=zone_of,
        versions=versions,
    )
    if plan.label_check is not None and (con.execute(plan.label_check).fetchone() or (0,))[0]:
        raise AssemblyError(f"the label table has more than one row for some {list(label_key or definition.contract.key)}")
    for table, select in plan.steps:
        con.execute(f"CREATE TABLE {table} AS {select}")
    counted = con.execute(f"SELECT count(*) FROM {plan.population}").fetchone()
    con.execute(f"CREATE TABLE __examples AS SELECT {', '.join(quote(c) for c in plan.columns)} FROM {plan.examples}")
    for table in [*dict.fromkeys(t for t, _ in plan.steps), *names.values()]:  # only the examples are read from here on: their blocks leave the pool
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return EngineExamples(con, "__examples", definition.contract), int(counted[0] if counted else 0)


def _sorted(table: pa.Table, definition: DatasetDefinition) -> pa.Table:
    return table.sort_by([(k, "ascending") for k in definition.contract.key])


__all__ = ["assemble_tables", "engine_limits", "engine_refusal", "examples_out_of_core", "known_at_sources"]
