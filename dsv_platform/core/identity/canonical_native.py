"""The optional compiled path of canonical row text (``dsv_platform._native``).

Compiled path (optional, ``dsv_platform._native``): :func:`native_rows` plans
a whole partition once; :meth:`NativeRows.encode` then gathers, formats and
joins a slice of rows in one C pass (integers, bools, strings with escapes,
binary, decimal128 and timestamps straight from their Arrow buffers; floats,
dates and rare layouts through the per-value texts of :mod:`dsv_platform.core.identity.canonical`). It gives
the same bytes as the pure path (``test_native_rowtext.py``), which stays the
reference and the fallback: anything the plan does not handle, and every
error, goes through :func:`encode_rows`. :func:`set_native` switches it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from dsv_platform import _native
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.identity.canonical import _UNIT_EXP, _as_array, _string_buffers, encode_column

# A column for the compiled encoder: a tuple of Arrow buffers, or the Column whose texts are made per slice.
ColumnSpec = tuple[object, ...] | Column
# ``take(name, order, start, rows)``: a column slice gathered in ``order``.
Take = Callable[[str, np.ndarray | None, int, int], pa.Array]

_native_enabled = _native.available


def native_available() -> bool:
    """True when the compiled row encoder was built (``dsv_platform._native``)."""
    return _native.available


def native_enabled() -> bool:
    return _native_enabled


def set_native(enabled: bool) -> bool:
    """Use the compiled row encoder (when built) or the pure path; returns the previous setting."""
    global _native_enabled
    if enabled and not _native.available:
        raise RuntimeError("the compiled row encoder (dsv_platform._native._rowtext) is not built")
    previous, _native_enabled = _native_enabled, bool(enabled)
    return previous


def _chunk_spec(chunk: pa.Array, value_buffers: tuple[int, ...]) -> tuple[object, ...]:
    buffers = chunk.buffers()
    validity = buffers[0] if chunk.null_count else None
    picked = [buffers[i] for i in value_buffers] + [None] * (2 - len(value_buffers))
    return (len(chunk), chunk.offset, validity, picked[0], picked[1])


def _text_spec(kind: int, chunks: list[pa.Array], large: bool) -> tuple[object, ...]:
    """A string/binary column for the compiled encoder: by offsets, or as fixed-width records.

    When every value has the same byte length (no nulls, as in codes and
    padded identifiers), the offsets are not passed at all: one cache miss per
    value instead of two in a random-order gather.
    """
    width = None
    for chunk in chunks:
        if not len(chunk):
            continue
        if chunk.null_count:
            width = None
            break
        offsets, _ = _string_buffers(chunk)
        w = int(offsets[1])
        if not 0 < w <= 64 or (width is not None and w != width) or int(offsets[-1]) != w * len(chunk) or not bool(np.all(np.diff(offsets) == w)):
            width = None
            break
        width = w
    if width is None:
        return (kind, 8 if large else 4, 0, False, [_chunk_spec(c, (1, 2)) for c in chunks])
    specs = []
    for chunk in chunks:
        if not len(chunk):
            specs.append((0, 0, None, None, None))
            continue
        offset_width = np.int64 if large else np.int32
        base = int(np.frombuffer(chunk.buffers()[1], dtype=offset_width)[chunk.offset])
        specs.append((len(chunk), chunk.offset, None, None, chunk.buffers()[2].slice(base, width * len(chunk))))
    return (kind, 8 if large else 4, width, False, specs)


class NativeRows:
    """A partition planned for the compiled encoder: each column as its Arrow buffers, or as texts made per slice."""

    def __init__(self, table: pa.Table, contract: Contract, specs: list[ColumnSpec], source: str | None) -> None:
        self.table = table
        self.contract = contract
        self.specs = specs
        self.source = source

    def encode(self, order: np.ndarray | None, start: int, rows: int, take: Take | None = None, *, ends: np.ndarray | None = None) -> memoryview:
        """Canonical bytes (buffer protocol) of rows ``order[start:start+rows]`` (or ``start:start+rows``).

        ``take(name, order, start, rows)`` gathers a column slice for the text
        columns; it defaults to Arrow's take. ``ends`` (int64, ``rows`` long)
        receives the offset just past each row. Raises ValueError/IndexError or
        ContractViolationError when the slice needs the pure path (which then
        reports the error, exactly as it would have).
        """
        columns: list[tuple[object, ...]] = []
        perm = None if order is None else np.ascontiguousarray(order, dtype=np.int64)
        for spec in self.specs:
            if not isinstance(spec, Column):
                columns.append(spec)
                continue
            if take is not None:
                values = take(spec.name, order, start, rows)
            else:
                col = self.table.column(spec.name)
                values = col.slice(start, rows) if perm is None else col.take(pa.array(perm[start : start + rows], pa.int64()))
            values = _as_array(values)
            texts = _as_array(encode_column(values, spec, table=pa.table({spec.name: values}), key=(), source=self.source))
            width = 8 if pa.types.is_large_string(texts.type) else 4
            columns.append((_native.TEXT, width, 0, True, [_chunk_spec(texts, (1, 2))]))
        return memoryview(_native.encode(columns, perm, start, rows, ends))

    @staticmethod
    def release() -> None:
        """Free the output buffers the compiled encoder keeps for reuse between slices."""
        _native.trim()


def native_rows(table: pa.Table, contract: Contract, *, source: str | None = None) -> NativeRows | None:
    """Plan ``table`` for the compiled encoder, or None (not built, disabled, or a case only the pure path handles).

    None is also the answer for every input the pure path would refuse
    (missing column, wrong type, null in a non-nullable column, naive
    timestamp), so errors always come from the pure path.
    """
    if not _native_enabled or not contract.columns:
        return None
    specs: list[ColumnSpec] = []
    for column in contract.columns:
        if column.name not in table.column_names:
            return None
        values = table.column(column.name)
        if values.null_count and not column.nullable:
            return None
        spec = _column_spec(column, values.type, values.chunks)
        if spec is None:
            return None
        specs.append(spec)
    return NativeRows(table, contract, specs, source)


def _column_spec(column: Column, vt: pa.DataType, chunks: list[pa.Array]) -> ColumnSpec | None:
    """One column's plan: its Arrow buffers, the column itself (texts made per slice), or None (pure path only)."""
    t = column.type
    if t.is_integer:
        if not pa.types.is_integer(vt):
            return None
        return (_native.INT, vt.bit_width // 8, int(pa.types.is_signed_integer(vt)), False, [_chunk_spec(c, (1,)) for c in chunks])
    if t is LogicalType.BOOL:
        return (_native.BOOL, 0, 0, False, [_chunk_spec(c, (1,)) for c in chunks]) if pa.types.is_boolean(vt) else None
    if t is LogicalType.STRING:
        if pa.types.is_string(vt) or pa.types.is_large_string(vt):
            return _text_spec(_native.STRING, chunks, pa.types.is_large_string(vt))
        return column if pa.types.is_string_view(vt) else None
    if t is LogicalType.BINARY:
        if pa.types.is_binary(vt) or pa.types.is_large_binary(vt):
            return _text_spec(_native.BINARY, chunks, pa.types.is_large_binary(vt))
        return column if pa.types.is_fixed_size_binary(vt) else None
    if t is LogicalType.DECIMAL:
        if not pa.types.is_decimal(vt) and not pa.types.is_integer(vt):
            return None
        if vt == column.arrow_type and pa.types.is_decimal128(vt) and 0 <= vt.scale <= 38:
            return (_native.DECIMAL128, vt.scale, 0, False, [_chunk_spec(c, (1,)) for c in chunks])
        return column
    if t is LogicalType.TIMESTAMP:
        if not pa.types.is_timestamp(vt) or vt.tz is None:
            return None
        shift = _UNIT_EXP[vt.unit] - _UNIT_EXP[column.resolution or "us"]
        return (_native.TIMESTAMP, shift, 0, False, [_chunk_spec(c, (1,)) for c in chunks])
    if t.is_float:
        return column if pa.types.is_floating(vt) else None
    if t is LogicalType.DATE:
        return column if pa.types.is_date(vt) else None
    return None
