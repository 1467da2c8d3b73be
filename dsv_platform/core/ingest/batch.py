"""Raw source batches as they land, and their parsing into contract rows.

A :class:`RawBatch` is what lands: the bytes plus who sent it, for which day,
its batch id, its landing format and when it arrived (``recorded_at``,
declared by the source, not read from a clock). :func:`prepare_batch` turns
the bytes into typed rows: the source's format reader applies the
compatibility view, exact duplicate rows are dropped, every cell is parsed to
its contract type and the rows are validated against the Pandera contract.
Bad rows are returned as data (``rejected`` plus failure cases); a batch that
cannot be read at all comes back with ``malformed_reason`` set and no rows.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.config.source import LandingFormat, SourceSpec
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.contracts.validation import FailureCase, ValidationReport, split_valid, validate
from dsv_platform.core.ingest.landing_format import EXTENSIONS, encode_batch, read_batch_table

PARSE_CHECK = "parse"
_FILE_NAME = re.compile(r"^(?P<source>[a-z][a-z0-9_]*)__(?P<day>\d{4}-\d{2}-\d{2})__(?P<batch>[A-Za-z0-9][A-Za-z0-9._-]{0,100})\.(?P<ext>csv|parquet|jsonl)\Z")


class BatchFile(NamedTuple):
    source: str
    day: dt.date
    batch_id: str
    format: LandingFormat


@dataclass(frozen=True)
class RawBatch:
    """One source batch exactly as it arrives."""

    source: str
    day: dt.date
    batch_id: str
    recorded_at: dt.datetime
    data: bytes = field(repr=False)
    format: LandingFormat = "csv"

    @property
    def file_name(self) -> str:
        return batch_file_name(self.source, self.day, self.batch_id, self.format)


def batch_file_name(source: str, day: dt.date, batch_id: str, fmt: LandingFormat = "csv") -> str:
    """The drop-folder file name of a batch: ``<source>__<YYYY-MM-DD>__<batch_id>.<csv|parquet|jsonl>``."""
    name = f"{source}__{day.isoformat()}__{batch_id}.{EXTENSIONS.get(fmt, fmt)}"
    if not _FILE_NAME.match(name):
        raise ValueError(f"cannot name a batch file for source {source!r}, batch id {batch_id!r}, format {fmt!r}: use [a-z0-9_] and [A-Za-z0-9._-]")
    return name


def parse_batch_file(name: str) -> BatchFile | None:
    """The parts of a drop-folder file name (any landing format), or None if it is not a batch file."""
    m = _FILE_NAME.match(name)
    if not m:
        return None
    try:
        day = dt.date.fromisoformat(m["day"])
    except ValueError:
        return None
    return BatchFile(m["source"], day, m["batch"], cast(LandingFormat, m["ext"]))


def parse_batch_file_name(name: str) -> tuple[str, dt.date, str] | None:
    """``(source, day, batch_id)`` of a CSV drop-folder file name (the CSV-only form; see :func:`parse_batch_file`)."""
    parsed = parse_batch_file(name)
    return None if parsed is None or parsed.format != "csv" else (parsed.source, parsed.day, parsed.batch_id)


def arrival_time(day: dt.date, *, hour: int = 2) -> dt.datetime:
    """When a batch about ``day`` arrives in the regular flow: the next morning, UTC."""
    return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(hour), tzinfo=dt.UTC)


@dataclass(frozen=True)
class PreparedBatch:
    """A batch parsed and validated: accepted rows, rejected rows with their failure cases."""

    accepted: pa.Table
    rejected: pa.Table
    report: ValidationReport
    duplicates_dropped: int = 0
    malformed_reason: str | None = None

    @property
    def malformed(self) -> bool:
        return self.malformed_reason is not None


def _parse_column(raw: pa.ChunkedArray, target: pa.DataType) -> tuple[pa.Array, list[tuple[int, Any]]]:
    """Cast (text or typed) cells to ``target``; cells that do not convert become null and are reported."""
    try:
        return pc.cast(raw, target).combine_chunks(), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    values: list[Any] = []
    bad: list[tuple[int, Any]] = []
    for i, cell in enumerate(raw.to_pylist()):
        try:
            values.append(pc.cast(pa.array([cell], raw.type), target)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values.append(None)
            bad.append((i, cell))
    return pa.array(values, target), bad


def _drop_exact_duplicates(raw: pa.Table) -> tuple[pa.Table, int]:
    """The batch without rows that repeat an earlier row exactly (first occurrence kept, order kept), and how many went."""
    if raw.num_rows < 2:
        return raw, 0
    if all(_groups_as_python_compares(f.type) or pa.types.is_floating(f.type) for f in raw.schema):
        try:
            return _drop_duplicates_vectorized(raw)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            pass  # a type Arrow cannot group by: compare the rows in Python
    return _drop_duplicates_by_rows(raw)


def _groups_as_python_compares(t: pa.DataType) -> bool:
    """Arrow groups values of ``t`` exactly as Python's ``==`` on their ``as_py()`` does (floats need :func:`_float_groups`)."""
    checks = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer, pa.types.is_boolean, pa.types.is_date, pa.types.is_timestamp)
    return any(bool(check(t)) for check in (*checks, pa.types.is_decimal, pa.types.is_binary, pa.types.is_null))


def _float_groups(raw: pa.Table) -> tuple[list[str], pa.Table]:
    """Grouping columns that compare floats as Python does: ``-0.0`` groups with ``0.0``; a row holding a NaN groups with no other."""
    names, nan = [], np.zeros(raw.num_rows, bool)
    for i, field_ in enumerate(raw.schema):
        if not pa.types.is_floating(field_.type):
            names.append(field_.name)
            continue
        col = raw.column(i)
        nan |= pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False)
        raw = raw.append_column(f"__dsv_f{i}", pc.if_else(pc.equal(col, 0), pa.scalar(0.0, field_.type), col))
        names.append(f"__dsv_f{i}")
    if nan.any():
        raw = raw.append_column("__dsv_nan", pa.array(np.where(nan, np.arange(raw.num_rows, dtype=np.int64), -1)))
        names.append("__dsv_nan")
    return names, raw


def _drop_duplicates_vectorized(raw: pa.Table) -> tuple[pa.Table, int]:
    position = "__dsv_row"
    names, keyed = _float_groups(raw)
    numbered = keyed.append_column(position, pa.array(np.arange(raw.num_rows, dtype=np.int64)))
    first = numbered.group_by(names, use_threads=False).aggregate([(position, "min")]).column(f"{position}_min")
    if len(first) == raw.num_rows:
        return raw, 0
    keep = pc.sort_indices(first)
    return raw.take(pc.take(first, keep)), raw.num_rows - len(first)


def _drop_duplicates_by_rows(raw: pa.Table) -> tuple[pa.Table, int]:
    seen: set[tuple[Any, ...]] = set()
    keep: list[int] = []
    for i, row in enumerate(zip(*(raw.column(n).to_pylist() for n in raw.column_names), strict=True)):
        if row not in seen:
            seen.add(row)
            keep.append(i)
    return raw.take(pa.array(keep, pa.int64())), raw.num_rows - len(keep)


def prepare_table(raw: pa.Table | str, contract: Contract) -> PreparedBatch:
    """Deduplicate, parse and validate contract-named columns (text or typed); a string is the malformed reason."""
    schema = contract.arrow_schema
    if isinstance(raw, str):
        empty = schema.empty_table()
        return PreparedBatch(empty, empty, ValidationReport(contract.name, 0, ()), malformed_reason=raw)
    raw, dropped = _drop_exact_duplicates(raw)
    columns: dict[str, pa.Array] = {}
    parse_failures: list[FailureCase] = []
    for col in contract.columns:
        arr, bad = _parse_column(raw.column(col.name), col.arrow_type)
        columns[col.name] = arr
        for i, cell in bad:
            key = tuple(raw.column(k)[i].as_py() for k in contract.key)
            parse_failures.append(FailureCase(col.name, f"{PARSE_CHECK}({col.arrow_type})", cell, key, i))
    loose = pa.table(columns, schema=pa.schema([pa.field(f.name, f.type, nullable=True) for f in schema]))
    checked = validate(loose, contract)
    failures = sorted([*checked.failures, *parse_failures], key=lambda f: (f.row_index if f.row_index is not None else -1, f.column or "", f.check))
    report = ValidationReport(contract.name, loose.num_rows, tuple(failures))
    accepted, rejected = split_valid(loose, report)
    return PreparedBatch(accepted.cast(schema), rejected, report, duplicates_dropped=dropped)


def prepare_batch(data: bytes, spec: SourceSpec, *, replay: bool = False) -> PreparedBatch:
    """Read ``data`` by the source's landing format, then parse, deduplicate and validate it (see the module docstring;
    ``replay``: a batch landed under an earlier contract, as :func:`read_batch_table` reads it)."""
    return prepare_table(read_batch_table(data, spec, replay=replay), spec.contract)


def batch_of(table: pa.Table, *, source: str, day: dt.date, batch_id: str, recorded_at: dt.datetime, fmt: LandingFormat = "csv") -> RawBatch:
    """A :class:`RawBatch` carrying ``table`` encoded in landing format ``fmt``."""
    return RawBatch(source=source, day=day, batch_id=batch_id, recorded_at=recorded_at, data=encode_batch(table, fmt), format=fmt)
