"""The point-in-time assembly as SQL for an out-of-core engine (DuckDB): the same rows as :mod:`.assembly`.

:func:`plan_assembly` turns a definition into statements over one table per input, each
holding that input's pinned rows with ``_recorded_at`` and ``_batch``: the latest row per key
as known at the watermark, the window and population, each as-of join (ties on valid time to
the largest contract key, ``lag`` and ``max_age`` in the finest unit of the pair), the label
join. Times compare as integer instants, exactly as :func:`.assembly.instants` computes them.
The differential tests hold both paths equal, row for row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from dsv_platform.core.assembly.assembly import PER_DAY, AssemblyError, midnight, unit_of
from dsv_platform.core.assembly.known_at import BATCH, NEVER, RECORDED_AT
from dsv_platform.core.config.aggregation import ZoneOf
from dsv_platform.core.config.dataset_definition import AsOfJoin, DatasetDefinition
from dsv_platform.core.config.platform_config import provided_columns
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.config.timezones import zone

_EPOCH_FN = {"ms": "epoch_ms", "us": "epoch_us", "ns": "epoch_ns"}


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _cols(names: Sequence[str], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{quote(n)}" for n in names)


def unsupported(schema: pa.Schema) -> str | None:
    """Why the engine cannot carry ``schema`` exactly (None: it can): nanosecond timestamps and decimals past 38 digits."""
    for f in schema:
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
            return f"column {f.name!r} is a nanosecond timestamp"
        if pa.types.is_decimal(f.type) and f.type.precision > 38:
            return f"column {f.name!r} is a decimal of {f.type.precision} digits"
    return None


def instant_sql(column: str, arrow_type: pa.DataType, unit: str) -> str:
    """The integer instant of a date or timestamp column in ``unit`` since the epoch (a date is its midnight UTC)."""
    if pa.types.is_date(arrow_type):
        return f"((CAST({column} AS DATE) - DATE '1970-01-01')::BIGINT * {PER_DAY[unit]})"
    if pa.types.is_timestamp(arrow_type):
        return f"({_EPOCH_FN['ms']}({column}) // 1000)" if unit == "s" else f"{_EPOCH_FN[unit]}({column})"
    raise AssemblyError(f"a time column must be a date or timestamp, got {arrow_type}")


def _ticks(delta: dt.timedelta, unit: str) -> int:
    """A lag or age in ``unit``, as :func:`.assembly.as_of_indices` rounds it."""
    return int(delta.total_seconds() * (PER_DAY[unit] // 86_400))


def micros(instant: dt.datetime) -> int:
    """Microseconds since the epoch of ``instant`` (a naive one is UTC, as Arrow reads it)."""
    aware = instant if instant.tzinfo is not None else instant.replace(tzinfo=dt.UTC)
    return (aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


def latest_sql(raw: str, key: Sequence[str], columns: Sequence[str], watermark: dt.datetime, *, excluding: str | None) -> str:
    """Each key's row with the greatest ``_recorded_at`` (then ``_batch``) among rows recorded by the watermark.

    The ranking runs over the key and clock columns and the row id alone; the wide rows are then read once by row id.
    """
    where = f"epoch_us({RECORDED_AT}) <= {micros(watermark)}"
    if excluding is not None:
        where += f" AND {BATCH} NOT IN (SELECT batch FROM {excluding})"
    order = f"{RECORDED_AT} DESC, {BATCH} DESC"
    ranked = f"SELECT rowid AS __row FROM {raw} WHERE {where} QUALIFY row_number() OVER (PARTITION BY {_cols(key)} ORDER BY {order}) = 1"
    return f"SELECT {_cols(columns)} FROM {raw} WHERE rowid IN ({ranked})"


def versions_sql(raw: str, columns: Sequence[str], watermark: dt.datetime, *, excluding: str | None) -> str:
    """Every version recorded by the watermark (not from an excluded batch), with ``_recorded_at`` and ``_batch``: a join ``as_known_at``'s input."""
    where = f"epoch_us({RECORDED_AT}) <= {micros(watermark)}"
    if excluding is not None:
        where += f" AND {BATCH} NOT IN (SELECT batch FROM {excluding})"
    return f"SELECT {_cols([*columns, RECORDED_AT, BATCH])} FROM {raw} WHERE {where}"


@dataclass
class Plan:
    """Statements ``(table, select)`` run in order (each ``CREATE TABLE table AS select``), and what the result holds."""

    steps: list[tuple[str, str]] = field(default_factory=list)
    examples: str = ""
    population: str = ""
    label_check: str | None = None
    columns: list[str] = field(default_factory=list)


def _window(definition: DatasetDefinition, schema: pa.Schema, zone_of: ZoneOf) -> str:
    window = definition.observation_window
    kind = schema.field(window.column).type
    unit = unit_of(kind)
    first = midnight(window.start, unit, window.timezone, zone_of)
    after = midnight(window.end + dt.timedelta(days=1), unit, window.timezone, zone_of)
    ticks = instant_sql(quote(window.column), kind, unit)
    return f"{ticks} >= {int(first)} AND {ticks} < {int(after)}"


def _join(left: str, right: str, join: AsOfJoin, spec: SourceSpec, schemas: Mapping[str, pa.Schema], columns: Sequence[str]) -> tuple[str, str]:
    """``(the right side deduplicated on (on, valid time), the as-of join)`` of one join."""
    lschema, rschema = schemas["__rows"], schemas[join.source]
    if spec.valid_time is None or join.time is None:  # a reference table: every row valid at any time, a lookup by ``on``
        unit, valid, cut = "s", "0", f"0 + {_ticks(join.lag, 's')}"
    else:
        unit = unit_of(lschema.field(join.time).type, rschema.field(spec.valid_time).type)
        valid = instant_sql(quote(spec.valid_time), rschema.field(spec.valid_time).type, unit)
        cut = instant_sql(quote(join.time), lschema.field(join.time).type, unit)
    on = list(join.on)
    present = " AND ".join(f"{quote(c)} IS NOT NULL" for c in on)
    largest_key = ", ".join(f"{quote(k)} DESC" for k in spec.contract.key)
    side = (f"SELECT {_cols(on)}, __v, {_cols(columns)} FROM (SELECT *, {valid} AS __v FROM {right} WHERE {valid} IS NOT NULL AND {present}) "
            f"QUALIFY row_number() OVER (PARTITION BY {_cols(on)}, __v ORDER BY {largest_key}) = 1")  # fmt: skip
    fresh = "" if join.max_age is None else f"r.__v >= l.__cut - {_ticks(join.max_age, unit)}"
    picked = ", ".join(f"r.{quote(c)}" if not fresh else f"CASE WHEN {fresh} THEN r.{quote(c)} END AS {quote(c)}" for c in columns)
    match = " AND ".join([*(f"l.{quote(c)} = r.{quote(c)}" for c in on), "l.__cut >= r.__v"])
    body = f"SELECT l.* EXCLUDE (__cut), {picked} FROM (SELECT *, {cut} - {_ticks(join.lag, unit)} AS __cut FROM {left}) l ASOF LEFT JOIN __SIDE__ r ON {match}"
    return side, body


def _known_join(left: str, versions: str, join: AsOfJoin, spec: SourceSpec, lschema: pa.Schema, rschema: pa.Schema, columns: Sequence[str]) -> tuple[str, str]:
    """``(the versions with when each can be picked and is superseded, the join as known at each cutoff)`` (core/assembly/known_at.py)."""
    assert join.time is not None  # the configuration requires a time for as_known_at
    stamp = pa.timestamp("us", tz="UTC")
    vtype = rschema.field(spec.valid_time).type if spec.valid_time is not None else None
    unit = unit_of(lschema.field(join.time).type, stamp, *([vtype] if vtype is not None else []))
    valid = instant_sql(quote(spec.valid_time), vtype, unit) if spec.valid_time is not None and vtype is not None else "0"
    rec, cut = instant_sql(RECORDED_AT, stamp, unit), instant_sql(quote(join.time), lschema.field(join.time).type, unit)
    on, key = list(join.on), list(spec.contract.key)
    present = " AND ".join(f"{quote(c)} IS NOT NULL" for c in on)
    keys = ", ".join(f"{quote(k)} AS __k{j}" for j, k in enumerate(key))
    ends = f"coalesce(lead({rec}) OVER (PARTITION BY {_cols(key)} ORDER BY {RECORDED_AT}, {BATCH}), {NEVER})"
    priority = ", ".join(["__v", *(f"__k{j}" for j in range(len(key)))])
    side = (f"SELECT row_number() OVER (ORDER BY {priority}) AS __p, * FROM (SELECT {_cols(on)}, {valid} AS __v, greatest({rec}, {valid}) AS __a, "
            f"{ends} AS __end, {keys}, {_cols(columns)} FROM {versions}) WHERE __v IS NOT NULL AND {present} AND __a < __end")  # fmt: skip
    fresh = "" if join.max_age is None else f"r.__v >= l.__cut - {_ticks(join.max_age, unit)}"
    picked = ", ".join(f"r.{quote(c)}" if not fresh else f"CASE WHEN {fresh} THEN r.{quote(c)} END AS {quote(c)}" for c in columns)
    same = " AND ".join(f"l.{quote(c)} = r.{quote(c)}" for c in on)
    lagged = f"SELECT *, {cut} - {_ticks(join.lag, unit)} AS __cut, rowid AS __lid FROM {left}"  # rowid: the same in every read of {left}
    running = f"SELECT DISTINCT {_cols(on)}, __a, max(__p) OVER (PARTITION BY {_cols(on)} ORDER BY __a) AS __best FROM __SIDE__ WHERE __end = {NEVER}"
    latest = f"SELECT l.__lid, r.__best FROM ({lagged}) l ASOF JOIN ({running}) r ON {same} AND l.__cut >= r.__a"
    known = f"r.__a <= l.__cut AND l.__cut < r.__end AND r.__end < {NEVER}"  # a superseded version, known at the cutoff
    moved = f"SELECT l.__lid, max(r.__p) AS __best FROM ({lagged}) l JOIN __SIDE__ r ON {same} AND {known} GROUP BY l.__lid"
    picks = f"SELECT __lid, max(__best) AS __best FROM ({latest} UNION ALL {moved}) GROUP BY __lid"
    body = (f"SELECT l.* EXCLUDE (__cut, __lid), {picked} FROM ({lagged}) l LEFT JOIN ({picks}) p ON p.__lid = l.__lid "
            f"LEFT JOIN __SIDE__ r ON r.__p = p.__best")  # fmt: skip
    return side, body


def _join_of(
    rows: str,
    join: AsOfJoin,
    spec: SourceSpec,
    tables: Mapping[str, str],
    versions: Mapping[str, str],
    schemas: Mapping[str, pa.Schema],
    columns: Sequence[str],
) -> tuple[str, str]:
    """The ordinary join over the source's latest rows, or the join as known at the example time over its versions."""
    if join.known_at is None:
        return _join(rows, tables[join.source], join, spec, schemas, columns)
    if join.source not in versions:
        raise AssemblyError(f"the join of {join.source} as known at the example time needs the versions of {join.source}; none were given")
    return _known_join(rows, versions[join.source], join, spec, schemas["__rows"], schemas[join.source], columns)


def plan_assembly(
    definition: DatasetDefinition,
    specs: Mapping[str, SourceSpec],
    tables: Mapping[str, str],
    schemas: Mapping[str, pa.Schema],
    *,
    label_key: Sequence[str] | None = None,
    label_columns: Sequence[str] = (),
    zone_of: ZoneOf = zone,
    versions: Mapping[str, str] | None = None,
) -> Plan:
    """The statements assembling ``definition``'s examples from ``tables`` (input name -> table of its latest rows).

    ``schemas`` gives each input's contract schema; the label table, if any, is ``tables["__labels"]``;
    ``versions``: per source joined ``as_known_at``, the table of its versions (:func:`versions_sql`).
    """
    if definition.derive or definition.aggregate is not None:
        raise AssemblyError(f"{definition.ref}: derived columns and aggregations run in the in-memory assembly")
    provided = provided_columns(definition, dict(specs))
    plan = Plan()
    base_schema = schemas[definition.base]
    where = _window(definition, base_schema, zone_of)
    population = definition.population_filter
    if population is not None:
        where += f" AND {quote(population.column)} IN (SELECT v FROM __population)"
    plan.steps.append(("__rows0", f"SELECT * FROM {tables[definition.base]} WHERE {where}"))
    rows, row_schema = "__rows0", base_schema
    for i, join in enumerate(definition.as_of_joins):
        right = schemas[join.source]
        columns = [c for c, source in provided.items() if source == join.source and c not in row_schema.names]
        missing = [c for c in [*join.on, *filter(None, [specs[join.source].valid_time]), *columns] if c not in right.names]
        if missing:
            raise AssemblyError(f"the {join.source} table lacks column(s) {missing}")
        if not columns:  # a join that adds no column changes no row (it is a left join)
            continue
        side, body = _join_of(rows, join, specs[join.source], tables, versions or {}, {**schemas, "__rows": row_schema}, columns)
        plan.steps.append((f"__side{i}", side))
        plan.steps.append((f"__rows{i + 1}", body.replace("__SIDE__", f"__side{i}")))
        rows, row_schema = f"__rows{i + 1}", pa.schema([*row_schema, *(right.field(c) for c in columns)])
    current = list(row_schema.names)
    plan.population = rows
    if definition.label is not None:
        if "__labels" not in tables:
            raise AssemblyError(f"{definition.ref} pins label {definition.label.name}:v{definition.label.version}; no label table was given")
        key = list(label_key or definition.contract.key)
        wanted = [c for c in definition.contract.column_names if c not in provided and c not in key]
        missing = [c for c in [*key, *wanted] if c not in label_columns]
        if missing:
            raise AssemblyError(f"the label table lacks column(s) {missing}")
        labels = tables["__labels"]
        plan.label_check = f"SELECT count(*) FROM (SELECT 1 FROM {labels} GROUP BY {_cols(key)} HAVING count(*) > 1)"
        match = " AND ".join(f"e.{quote(k)} = l.{quote(k)}" for k in key)
        extra = "".join(f", l.{quote(c)}" for c in wanted)
        plan.steps.append(("__labelled", f"SELECT e.*{extra} FROM {rows} e JOIN {labels} l ON {match}"))
        rows, current = "__labelled", [*current, *wanted]
    missing = [c for c in definition.contract.column_names if c not in current]
    if missing:
        raise AssemblyError(f"{definition.ref}: no input provides column(s) {missing}")
    plan.examples, plan.columns = rows, list(definition.contract.column_names)
    return plan


__all__ = ["BATCH", "RECORDED_AT", "Plan", "instant_sql", "latest_sql", "micros", "plan_assembly", "quote", "unsupported", "versions_sql"]
