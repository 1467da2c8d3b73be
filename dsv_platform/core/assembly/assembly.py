"""Point-in-time assembly of a dataset's examples from its base, joined and label tables (pure pyarrow).

One example per base row inside the observation window and population. Each as-of join takes,
per base row, the joined source's row of the same entity whose valid time is the latest at or
before ``time - lag`` (and, with ``max_age``, not older than ``time - lag - max_age``); no such
row gives nulls. Ties on valid time go to the row with the largest contract key. A date is the
instant of its midnight UTC. Rows recorded after the watermark are the reader's to drop; a join
``as_known_at: example_time`` reads the versions as known at its cutoff (:mod:`.known_at`).
Derived columns and an aggregation (:mod:`dsv_platform.core.config.aggregation`) follow the joins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.assembly.known_at import BATCH, RECORDED_AT, known_at_pick, superseded_at
from dsv_platform.core.assembly.transform import transform
from dsv_platform.core.config.aggregation import ZoneOf
from dsv_platform.core.config.dataset_definition import AsOfJoin, DatasetDefinition, ObservationWindow, PopulationFilter
from dsv_platform.core.config.platform_config import provided_columns
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.config.timezones import zone
from dsv_platform.core.errors import DsvError

Ints = npt.NDArray[np.int64]
_UNITS = ("s", "ms", "us", "ns")
PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


class AssemblyError(DsvError):
    """The tables handed to the assembly do not fit the definition (a missing column, duplicate labels)."""


def unit_of(*types: pa.DataType) -> str:
    """The finest timestamp unit among ``types`` ('s' when none is a timestamp): the unit instants are compared in."""
    units = [t.unit for t in types if pa.types.is_timestamp(t)]
    return max(units, key=_UNITS.index) if units else "s"


def instants(column: pa.ChunkedArray | pa.Array, unit: str) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """``(int64 instants in ``unit`` since the epoch, valid mask)`` of a date or timestamp column."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_date(arr.type):
        days = pc.cast(pc.cast(arr, pa.date32()), pa.int32()).fill_null(0)
        return np.asarray(days.to_numpy(), dtype=np.int64) * PER_DAY[unit], valid
    if pa.types.is_timestamp(arr.type):
        ticks = pc.cast(pc.cast(arr, pa.timestamp(unit, tz=arr.type.tz)), pa.int64()).fill_null(0)
        return np.asarray(ticks.to_numpy(), dtype=np.int64), valid
    raise AssemblyError(f"a time column must be a date or timestamp, got {arr.type}")


def entity_codes(left: pa.Table, right: pa.Table, on: Sequence[str]) -> tuple[Ints, Ints]:
    """Dense entity codes shared by both tables over the ``on`` columns; -1 where any of them is null."""
    n = left.num_rows
    code = np.zeros(n + right.num_rows, dtype=np.int64)
    for col in on:
        right_col = right.column(col).cast(left.schema.field(col).type)
        both = pa.chunked_array([*left.column(col).chunks, *right_col.chunks], type=left.schema.field(col).type)
        encoded = pc.dictionary_encode(both.combine_chunks())
        part = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        combined = np.where((code < 0) | (part < 0), -1, code * (len(encoded.dictionary) + 1) + part)
        _, dense = np.unique(combined, return_inverse=True)
        code = np.where(combined < 0, -1, dense.astype(np.int64))
    return code[:n], code[n:]


def _key_ranks(table: pa.Table, key: Sequence[str]) -> Ints:
    ranks = np.empty(table.num_rows, dtype=np.int64)
    order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in key]).to_numpy() if key else np.arange(table.num_rows)
    ranks[order] = np.arange(table.num_rows)
    return ranks


def as_of_indices(left: pa.Table, right: pa.Table, join: AsOfJoin, valid_time: str | None, key: Sequence[str]) -> pa.Array:
    """Per left row, the index of its as-of row in ``right`` (null when there is none).

    Without ``valid_time`` (a reference table) every right row is valid at any time: the row of the same entity with the largest key.
    """
    if valid_time is None or join.time is None:
        unit = "s"
        cutoff, left_ok = np.zeros(left.num_rows, dtype=np.int64), np.ones(left.num_rows, dtype=bool)
        valid, right_ok = np.zeros(right.num_rows, dtype=np.int64), np.ones(right.num_rows, dtype=bool)
    else:
        unit = unit_of(left.schema.field(join.time).type, right.schema.field(valid_time).type)
        cutoff, left_ok = instants(left.column(join.time), unit)
        cutoff = cutoff - int(join.lag.total_seconds() * (PER_DAY[unit] // 86_400))
        valid, right_ok = instants(right.column(valid_time), unit)
    lcode, rcode = entity_codes(left, right, join.on)
    left_ok &= lcode >= 0
    right_ok &= rcode >= 0
    _, ranks = np.unique(np.concatenate([cutoff, valid]), return_inverse=True)
    width = int(ranks.max(initial=0)) + 2
    lcomp = lcode * width + ranks[: left.num_rows].astype(np.int64)
    rcomp = np.where(right_ok, rcode * width + ranks[left.num_rows :].astype(np.int64), -1)
    perm = np.lexsort((_key_ranks(right, key), rcomp))
    perm = perm[rcomp[perm] >= 0]
    sorted_comp = rcomp[perm]
    pos = np.searchsorted(sorted_comp, lcomp, side="right") - 1
    found = left_ok & (pos >= 0)
    hit = perm[np.clip(pos, 0, None)] if perm.size else np.zeros(left.num_rows, dtype=np.int64)
    found &= perm.size > 0
    if perm.size:
        found &= rcode[hit] == lcode
        if join.max_age is not None:
            found &= valid[hit] >= cutoff - int(join.max_age.total_seconds() * (PER_DAY[unit] // 86_400))
    return pa.array(hit, pa.int64(), mask=~found)


def known_at_indices(left: pa.Table, versions: pa.Table, join: AsOfJoin, valid_time: str | None, key: Sequence[str]) -> pa.Array:
    """Per left row, the index of its row in ``versions`` as known at its cutoff (null when none; :mod:`.known_at`)."""
    assert join.time is not None  # the configuration requires a time for as_known_at
    types = [left.schema.field(join.time).type, versions.schema.field(RECORDED_AT).type]
    unit = unit_of(*types, *([versions.schema.field(valid_time).type] if valid_time else []))
    cutoff, left_ok = instants(left.column(join.time), unit)
    cutoff = cutoff - int(join.lag.total_seconds() * (PER_DAY[unit] // 86_400))
    recorded, _ = instants(versions.column(RECORDED_AT), unit)
    if valid_time is None:
        valid, right_ok = np.zeros(versions.num_rows, dtype=np.int64), np.ones(versions.num_rows, dtype=bool)
    else:
        valid, right_ok = instants(versions.column(valid_time), unit)
    lcode, rcode = entity_codes(left, versions, join.on)
    ends = superseded_at(versions, list(key), recorded)
    hit = known_at_pick(lcode, cutoff, left_ok, np.where(right_ok, rcode, -1), np.maximum(recorded, valid), ends, valid, _key_ranks(versions, key))
    found = hit >= 0
    if join.max_age is not None and versions.num_rows:
        found &= valid[np.clip(hit, 0, None)] >= cutoff - int(join.max_age.total_seconds() * (PER_DAY[unit] // 86_400))
    return pa.array(np.clip(hit, 0, None), pa.int64(), mask=~found)


def as_of_join(left: pa.Table, right: pa.Table, join: AsOfJoin, spec: SourceSpec, columns: Sequence[str]) -> pa.Table:
    """``left`` with ``columns`` of ``right`` (source ``spec``) joined as of each left row (see the module docstring).

    With ``join.known_at``, ``right`` holds every version recorded by the watermark, with ``_recorded_at`` and ``_batch``.
    """
    system = [RECORDED_AT, BATCH] if join.known_at is not None else []
    missing = [c for c in [*join.on, *([spec.valid_time] if spec.valid_time else []), *columns, *system] if c not in right.column_names]
    if missing:
        raise AssemblyError(f"the {spec.name} table lacks column(s) {missing}")
    pick = known_at_indices if join.known_at is not None else as_of_indices
    taken = right.select(list(columns)).take(pick(left, right, join, spec.valid_time, spec.contract.key))
    for name in columns:
        left = left.append_column(name, taken.column(name))
    return left


def midnight(day: dt.date, unit: str, tz_name: str | None, zone_of: ZoneOf) -> np.int64:
    """The instant (in ``unit`` since the epoch) of ``day``'s midnight: UTC, or local in ``tz_name``."""
    if tz_name is None:
        return np.int64((day.toordinal() - 719_163) * PER_DAY[unit])
    local = dt.datetime(day.year, day.month, day.day, tzinfo=zone_of(tz_name))
    return np.int64((local - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(seconds=1) * (PER_DAY[unit] // 86_400))


def in_window(table: pa.Table, window: ObservationWindow, zone_of: ZoneOf = zone) -> pa.Table:
    """Rows whose window column falls on a day from ``start`` to ``end`` inclusive (UTC days, or local days of the window's time zone)."""
    column = table.column(window.column)
    unit = unit_of(column.type)
    ticks, ok = instants(column, unit)
    first = midnight(window.start, unit, window.timezone, zone_of)
    after = midnight(window.end + dt.timedelta(days=1), unit, window.timezone, zone_of)
    return table.filter(pa.array(ok & (ticks >= first) & (ticks < after)))


def in_population(table: pa.Table, population: PopulationFilter | None) -> pa.Table:
    if population is None:
        return table
    column = table.column(population.column)
    values = pc.cast(pa.array(population.values, pa.string()), column.type)
    return table.filter(pc.fill_null(pc.is_in(column, values), False))


def join_labels(examples: pa.Table, labels: pa.Table, key: Sequence[str], columns: Sequence[str]) -> pa.Table:
    """Examples that have a label row (inner join on ``key``), with the label's ``columns``."""
    missing = [c for c in [*key, *columns] if c not in labels.column_names]
    if missing:
        raise AssemblyError(f"the label table lacks column(s) {missing}")
    labels = labels.select([*key, *columns])
    if labels.group_by(list(key)).aggregate([]).num_rows != labels.num_rows:
        raise AssemblyError(f"the label table has more than one row for some {list(key)}")
    return examples.join(labels, keys=list(key), join_type="inner")


def _right(join: AsOfJoin, joined: Mapping[str, pa.Table], versions: Mapping[str, pa.Table] | None) -> pa.Table:
    if join.known_at is None:
        return joined[join.source]
    if versions is None or join.source not in versions:
        raise AssemblyError(f"the join of {join.source} as known at the example time needs the versions of {join.source}; none were given")
    return versions[join.source]


def assemble_examples(
    definition: DatasetDefinition,
    base: pa.Table,
    joined: Mapping[str, pa.Table],
    specs: Mapping[str, SourceSpec],
    labels: pa.Table | None,
    *,
    label_key: Sequence[str] | None = None,
    zone_of: ZoneOf = zone,
    versions: Mapping[str, pa.Table] | None = None,
) -> tuple[pa.Table, int]:
    """The examples under the output contract, sorted by its key, and the population before the label join.

    ``label_key`` defaults to the output contract's key; ``zone_of`` gives the time zone rules (default: tzdata);
    ``versions``: per source joined ``as_known_at``, every version recorded by the watermark (with the system columns).
    """
    provided = provided_columns(definition, dict(specs))
    rows = in_population(in_window(base, definition.observation_window, zone_of), definition.population_filter)
    for join in definition.as_of_joins:
        columns = [c for c, source in provided.items() if source == join.source and c not in rows.column_names]
        rows = as_of_join(rows, _right(join, joined, versions), join, specs[join.source], columns)
    if definition.derive or definition.aggregate is not None:
        rows = transform(rows, definition.derive, definition.aggregate, zone_of)
    population = rows.num_rows
    contract = definition.contract
    if definition.label is not None:
        if labels is None:
            raise AssemblyError(f"{definition.ref} pins label {definition.label.name}:v{definition.label.version}; no label table was given")
        key = list(label_key or contract.key)
        rows = join_labels(rows, labels, key, [c for c in contract.column_names if c not in provided and c not in key])
    missing = [c for c in contract.column_names if c not in rows.column_names]
    if missing:
        raise AssemblyError(f"{definition.ref}: no input provides column(s) {missing}")
    out = rows.select(contract.column_names).cast(contract.arrow_schema)
    return out.sort_by([(k, "ascending") for k in contract.key]), population
