"""A landed batch prepared in record batches: what :func:`batch.prepare_table` does, in memory that follows the record batch.

Dropping exact duplicates (first kept) and rejecting every row whose key repeats are whole-batch rules, so the
batch is read more than once. The first pass keeps one 64-bit hash of each row's parsed key (8 bytes a row);
rows whose key hash repeats are the only candidates, and a second pass (only when there are any) compares those
rows exactly, as Python compares them. The last pass parses, validates (the key's uniqueness from the plan) and
yields the accepted rows; :func:`scan_batch` keeps only counts and failures. The outcome equals
``prepare_table`` on the whole batch: the same rows, failures, row positions and duplicate count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.contracts.validation import FailureCase, ValidationReport, split_valid, validate
from dsv_platform.core.ingest.batch import PARSE_CHECK, _parse_column
from dsv_platform.core.ingest.landing_stream import BATCH_ROWS, Opener, UnreadableBatch, contract_chunks
from dsv_platform.core.progress.stages import SILENT, Progress

_M = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class BatchPlan:
    """The whole-batch decisions of the first passes: raw row positions that are exact duplicates, and those whose key repeats."""

    rows_read: int
    drop: frozenset[int] = frozenset()
    repeated_key: frozenset[int] = frozenset()  # positions after the duplicates are dropped


@dataclass(frozen=True)
class BatchScan:
    """A batch read through: accepted rows per partition day, rejected count and every failure (or why it is unreadable)."""

    rows: int
    duplicates_dropped: int
    rejected: int
    failures: tuple[FailureCase, ...]
    accepted_days: dict[dt.date | None, int] = field(default_factory=dict)
    malformed_reason: str | None = None
    plan: BatchPlan | None = None

    @property
    def accepted(self) -> int:
        return sum(self.accepted_days.values())

    @property
    def malformed(self) -> bool:
        return self.malformed_reason is not None


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64, wrapping)."""
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = h ^ (h >> np.uint64(31))
    return out


def _text_hash(arr: pa.Array) -> np.ndarray:
    """A 64-bit hash per cell of the cell's text (equal values, equal text, equal hash); nulls hash alike."""
    text = pc.cast(arr, pa.large_string()) if not pa.types.is_large_string(arr.type) else arr
    n = len(text)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset : text.offset + n + 1]
    data = np.frombuffer(text.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]] if text.buffers()[2] is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    pos = np.arange(len(data), dtype=np.int64) - np.repeat(starts, lengths)
    powers = np.cumprod(np.full(int(lengths.max(initial=0)) + 1, _M, dtype=np.uint64))
    with np.errstate(over="ignore"):
        sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(data.astype(np.uint64) * powers[pos], dtype=np.uint64)])
        h = _mix(sums[starts + lengths] - sums[starts] + lengths.astype(np.uint64) * _M)
    valid = text.is_valid().to_numpy(zero_copy_only=False)
    return np.where(valid, h, np.uint64(0x5BD1E995))


def key_hashes(keys: list[pa.Array]) -> np.ndarray:
    """One hash per row over its key values (parsed)."""
    h = np.zeros(len(keys[0]) if keys else 0, np.uint64)
    with np.errstate(over="ignore"):
        for arr in keys:
            h = _mix(h * _M + _text_hash(arr))
    return h


def _repeated(h: np.ndarray) -> np.ndarray:
    """Positions whose hash occurs more than once."""
    if len(h) < 2:
        return np.zeros(0, np.int64)
    order = np.argsort(h, kind="stable")
    s = h[order]
    same = s[1:] == s[:-1]
    mark = np.zeros(len(h), bool)
    mark[1:] |= same
    mark[:-1] |= same
    return np.sort(order[mark])


def _parsed_keys(raw: pa.Table, contract: Contract) -> list[pa.Array]:
    types = {c.name: c.arrow_type for c in contract.columns}
    return [_parse_column(raw.column(k), types[k])[0] for k in contract.key]


def plan_batch(open_: Opener, spec: SourceSpec, *, rows: int = BATCH_ROWS) -> BatchPlan:
    """The first passes: key hashes of every row, then an exact look at the rows whose key hash repeats (raises UnreadableBatch)."""
    contract = spec.contract
    hashes = [key_hashes(_parsed_keys(chunk, contract)) for chunk in contract_chunks(open_, spec, rows=rows)]
    every = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    candidates = _repeated(every)
    if len(candidates) == 0:
        return BatchPlan(len(every))
    cand_rows, cand_keys, start = [], [], 0
    for chunk in contract_chunks(open_, spec, rows=rows):
        local = candidates[(candidates >= start) & (candidates < start + chunk.num_rows)] - start
        if len(local):
            picked = chunk.take(pa.array(local))
            cand_rows += [tuple(r.values()) for r in picked.to_pylist()]
            cand_keys += list(zip(*(a.to_pylist() for a in _parsed_keys(picked, contract)), strict=True))
        start += chunk.num_rows
    return _exact_plan(len(every), candidates, cand_rows, cand_keys, single_key=len(contract.key) == 1)


Row = tuple[object, ...]


def _exact_plan(rows_read: int, candidates: np.ndarray, cand_rows: list[Row], cand_keys: list[Row], *, single_key: bool) -> BatchPlan:
    seen: set[tuple[object, ...]] = set()
    drop: set[int] = set()
    kept: list[tuple[int, tuple[object, ...]]] = []
    for pos, row, key in zip(candidates.tolist(), cand_rows, cand_keys, strict=True):
        if row in seen:
            drop.add(pos)
        else:
            seen.add(row)
            kept.append((pos, key))
    counts: dict[tuple[object, ...], int] = {}
    for _, key in kept:
        counts[key] = counts.get(key, 0) + 1
    dropped_before = np.array(sorted(drop), np.int64)
    repeated = set()
    for pos, key in kept:
        if counts[key] > 1 and not (single_key and key[0] is None):  # Pandera: a null single key repeats nothing
            repeated.add(pos - int(np.searchsorted(dropped_before, pos)))
    return BatchPlan(rows_read, frozenset(drop), frozenset(repeated))


def day_counts(column: pa.ChunkedArray | pa.Array) -> dict[dt.date | None, int]:
    """Rows per partition day of a partition column (a date, a timestamp's UTC day), counted in Arrow; None for other values."""
    if len(column) == 0:
        return {}
    if pa.types.is_timestamp(column.type):
        column = pc.cast(pc.cast(column, pa.timestamp(column.type.unit)), pa.date32())  # a timestamp's UTC day
    if not pa.types.is_date(column.type):
        return {None: len(column)}
    return {entry["values"]: entry["counts"] for entry in pc.value_counts(column).to_pylist()}


def _uniqueness(loose: pa.Table, contract: Contract, local: list[int], offset: int) -> list[FailureCase]:
    """The failures Pandera reports for rows whose key repeats (one per non-null key column of a composite key)."""
    keys = [loose.column(k).take(pa.array(local, pa.int64())).to_pylist() for k in contract.key] if local else []
    out = []
    for j, i in enumerate(local):
        key = tuple(values[j] for values in keys)
        if len(contract.key) == 1:
            out.append(FailureCase(contract.key[0], "field_uniqueness", key[0], key, offset + i))
            continue
        out += [FailureCase(k, "multiple_fields_uniqueness", v, key, offset + i) for k, v in zip(contract.key, key, strict=True) if v is not None]
    return out


def _validated_chunk(raw: pa.Table, contract: Contract, plan: BatchPlan, offset: int) -> tuple[pa.Table, pa.Table, list[FailureCase]]:
    """One record batch (duplicates already dropped) parsed and validated; failures carry whole-batch row positions."""
    schema = contract.arrow_schema
    columns: dict[str, pa.Array] = {}
    failures: list[FailureCase] = []
    for col in contract.columns:
        arr, bad = _parse_column(raw.column(col.name), col.arrow_type)
        columns[col.name] = arr
        for i, cell in bad:
            key = tuple(raw.column(k)[i].as_py() for k in contract.key)
            failures.append(FailureCase(col.name, f"{PARSE_CHECK}({col.arrow_type})", cell, key, i))
    loose = pa.table(columns, schema=pa.schema([pa.field(f.name, f.type, nullable=True) for f in schema]))
    local = sorted(p - offset for p in plan.repeated_key if offset <= p < offset + loose.num_rows)
    failures += validate(loose, contract, unique=False).failures
    failures += _uniqueness(loose, contract, local, 0)
    report = ValidationReport(contract.name, loose.num_rows, tuple(failures))
    accepted, rejected = split_valid(loose, report)
    shifted = [replace(f, row_index=None if f.row_index is None else f.row_index + offset) for f in failures]
    return accepted.cast(schema), rejected, shifted


def validated_chunks(open_: Opener, spec: SourceSpec, plan: BatchPlan, *, rows: int = BATCH_ROWS) -> Iterator[tuple[pa.Table, pa.Table, list[FailureCase]]]:
    """The last pass: per record batch, its accepted rows, its rejected rows and their failures (whole-batch positions)."""
    start = offset = 0
    drop = np.array(sorted(plan.drop), np.int64)
    for chunk in contract_chunks(open_, spec, rows=rows):
        if len(drop):
            positions = np.arange(start, start + chunk.num_rows)
            chunk_kept = chunk.filter(pa.array(~np.isin(positions, drop)))
        else:
            chunk_kept = chunk
        start += chunk.num_rows
        yield _validated_chunk(chunk_kept, spec.contract, plan, offset)
        offset += chunk_kept.num_rows


def accepted_chunks(open_: Opener, spec: SourceSpec, plan: BatchPlan, *, rows: int = BATCH_ROWS) -> Iterator[pa.Table]:
    """The accepted rows of a planned batch, a record batch at a time (contract schema)."""
    for accepted, _, _ in validated_chunks(open_, spec, plan, rows=rows):
        if accepted.num_rows:
            yield accepted


def scan_batch(open_: Opener, spec: SourceSpec, *, rows: int = BATCH_ROWS, progress: Progress = SILENT) -> BatchScan:
    """Read a batch through (every pass) and keep only what landing reports: counts per day, failures, or why it is unreadable.

    ``progress`` is advanced by each record batch's rows as it is validated.
    """
    try:
        plan = plan_batch(open_, spec, rows=rows)
        days: dict[dt.date | None, int] = {}
        failures: list[FailureCase] = []
        rejected = kept = 0
        for accepted, bad, chunk_failures in validated_chunks(open_, spec, plan, rows=rows):
            for day, count in day_counts(accepted.column(spec.partition_by)).items() if spec.partition_by else [(None, accepted.num_rows)]:
                days[day] = days.get(day, 0) + count
            rejected += bad.num_rows
            kept += accepted.num_rows + bad.num_rows
            failures += chunk_failures
            progress.advance(accepted.num_rows + bad.num_rows)
    except UnreadableBatch as exc:
        return BatchScan(0, 0, 0, (), malformed_reason=str(exc))
    failures.sort(key=lambda f: (f.row_index if f.row_index is not None else -1, f.column or "", f.check))
    return BatchScan(kept, len(plan.drop), rejected, tuple(failures), {d: c for d, c in days.items() if c}, plan=plan)
