"""Canonical row text, `dsv-canon/1` (CANONICAL-ENCODING.md), vectorized over Arrow.

Each column becomes an Arrow string array of canonical value texts; the
columns are joined by TAB and every row ends in LF. No Python loop runs per
row or per value, except for the rare float values that sit within rounding
error of a half-way point (and non-finite ones), which are formatted exactly
by Python's correctly rounded ``%.*f``, and decimals whose magnitude is below
1e-6 (Arrow prints those in scientific notation), fixed exactly per value.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contract import Column, Contract, LogicalType
from dsv_platform.core.errors import ContractViolationError

NULL_TEXT = "\\N"
_ESCAPES = (("\\", "\\\\"), ("\b", "\\b"), ("\f", "\\f"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\v", "\\v"))
_NEEDS_ESCAPE = "[\\\\\\x08\\x0c\\n\\r\\t\\x0b]"
_HEX = np.array([f"{i:02x}".encode() for i in range(256)], dtype="S2").view(np.uint16)
_UNIT_EXP = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_INT64_SAFE = float(2**52)


def row_key_at(table: pa.Table, key: tuple[str, ...], index: int) -> object:
    """The natural key of row ``index``, for error messages."""
    values = tuple(table.column(k)[index].as_py() for k in key)
    return values[0] if len(values) == 1 else values


def _first_true(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(np.flatnonzero(np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False)))[0])


def _as_array(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def _escape(strings: pa.Array) -> pa.Array:
    if pc.any(pc.match_substring_regex(strings, _NEEDS_ESCAPE)).as_py():
        for raw, escaped in _ESCAPES:
            strings = pc.replace_substring(strings, raw, escaped)
    return strings


def _hex(values: pa.Array) -> pa.Array:
    """``\\x`` + lowercase hex of each value (null slots are replaced by the caller)."""
    values = _as_array(pc.cast(values, pa.large_binary()))
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64)[values.offset : values.offset + n + 1]
    data_buf = values.buffers()[2]
    start, end = int(offsets[0]), int(offsets[-1])
    raw = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None and end > start else np.empty(0, np.uint8)
    hexed = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer((offsets - start) * 2), pa.py_buffer(_HEX[raw].tobytes())])
    prefix = pa.scalar("\\\\x", pa.large_string())
    return pc.cast(pc.binary_join_element_wise(prefix, hexed, pa.scalar("", pa.large_string())), pa.string())


def _plain_decimal_text(value: Decimal, scale: int) -> str:
    text = format(value.quantize(Decimal(1).scaleb(-scale)) if scale else value.quantize(Decimal(1)), "f")
    return text[1:] if text.startswith("-") and Decimal(text) == 0 else text


def _decimal_text(values: pa.Array, scale: int) -> pa.Array:
    texts = pc.cast(values, pa.string())
    sci = pc.match_substring(texts, "E")
    if pc.any(sci).as_py():
        idx = np.flatnonzero(pc.fill_null(sci, False).to_numpy(zero_copy_only=False))
        fixed = [_plain_decimal_text(values[int(i)].as_py(), scale) for i in idx]
        py = texts.to_pylist()
        for i, text in zip(idx, fixed):
            py[int(i)] = text
        texts = pa.array(py, pa.string())
    return texts


def _unscaled_to_text(unscaled: np.ndarray, validity: pa.Array | None, scale: int) -> pa.Array:
    """Format int64 unscaled values with ``scale`` implied fraction digits."""
    n = len(unscaled)
    words = np.empty((n, 2), dtype=np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    dec = pa.Array.from_buffers(pa.decimal128(38, scale), n, [None, pa.py_buffer(words)])
    return _decimal_text(dec, scale)


def _float_text(values: pa.Array, scale: int) -> pa.Array:
    x = np.asarray(pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    finite = np.isfinite(x)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * (10.0**scale)
        r = np.rint(y)
        frac = np.abs(y - np.floor(y) - 0.5)
        margin = np.abs(y) * 2.0**-49 + 2.0**-1000
    fast = finite & (np.abs(y) < _INT64_SAFE) & (frac > margin)
    unscaled = np.where(fast, r, 0).astype(np.int64)
    texts = _unscaled_to_text(unscaled, None, scale)
    slow = np.flatnonzero(~fast)
    if len(slow):
        py = texts.to_pylist()
        for i in slow:
            v = float(x[i])
            if v != v:
                text = "NaN"
            elif v in (float("inf"), float("-inf")):
                text = "Infinity" if v > 0 else "-Infinity"
            else:
                text = "%.*f" % (scale, v)
                if text.startswith("-") and not text.strip("-0."):
                    text = text[1:]
            py[int(i)] = text
        texts = pa.array(py, pa.string())
    return texts


def _timestamp_text(values: pa.Array, column: Column, table: pa.Table, key: tuple[str, ...], source: str | None) -> pa.Array:
    unit = values.type.unit
    if values.type.tz is None:
        raise ContractViolationError(
            "naive timestamp (no time zone); canonical timestamps must be timezone-aware", column=column.name, source=source
        )
    ints = values.view(pa.int64()) if isinstance(values, pa.Array) else pc.cast(values, pa.int64())
    shift = _UNIT_EXP[unit] - _UNIT_EXP[column.resolution or "us"]
    if shift > 0:
        factor = 10**shift
        rem = pc.not_equal(pc.subtract(ints, pc.multiply(pc.divide(ints, factor), factor)), 0)
        if pc.any(rem).as_py():
            i = _first_true(rem)
            raise ContractViolationError(
                f"timestamp {values[i]} is not a whole number of {column.resolution} (stored at {unit}); refusing to truncate",
                column=column.name,
                value=values[i].as_py(),
                row_key=row_key_at(table, key, i),
                source=source,
            )
        ints = pc.divide(ints, factor)
    elif shift < 0:
        ints = pc.multiply_checked(ints, 10 ** (-shift))
    return pc.cast(ints, pa.string())


def encode_column(values: pa.Array, column: Column, *, table: pa.Table, key: tuple[str, ...], source: str | None = None) -> pa.Array:
    """Canonical text of every value of one column (nulls as ``\\N``)."""
    values = _as_array(values)
    t = column.type
    if values.null_count and not column.nullable:
        i = _first_true(values.is_null())
        raise ContractViolationError("null in a non-nullable column", column=column.name, row_key=row_key_at(table, key, i), source=source)
    if t.is_integer:
        if not pa.types.is_integer(values.type):
            raise ContractViolationError(f"expected an integer column, found {values.type}", column=column.name, source=source)
        texts = pc.cast(values, pa.string())
    elif t is LogicalType.BOOL:
        if not pa.types.is_boolean(values.type):
            raise ContractViolationError(f"expected a bool column, found {values.type}", column=column.name, source=source)
        texts = pc.if_else(values, "t", "f")
    elif t is LogicalType.STRING:
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type) or pa.types.is_string_view(values.type)):
            raise ContractViolationError(f"expected a string column, found {values.type}", column=column.name, source=source)
        texts = _escape(pc.cast(values, pa.string()) if not pa.types.is_string(values.type) else values)
    elif t is LogicalType.DECIMAL:
        if not pa.types.is_decimal(values.type) and not pa.types.is_integer(values.type):
            raise ContractViolationError(f"expected a decimal column, found {values.type}", column=column.name, source=source)
        if values.type != column.arrow_type:
            try:
                values = pc.cast(values, column.arrow_type)
            except pa.ArrowInvalid as exc:
                raise ContractViolationError(
                    f"values do not fit decimal({column.precision},{column.scale}): {exc}", column=column.name, source=source
                ) from exc
        texts = _decimal_text(values, column.scale or 0)
    elif t.is_float:
        if not pa.types.is_floating(values.type):
            raise ContractViolationError(f"expected a float column, found {values.type}", column=column.name, source=source)
        texts = _float_text(values, column.scale or 0)
    elif t is LogicalType.TIMESTAMP:
        if not pa.types.is_timestamp(values.type):
            raise ContractViolationError(f"expected a timestamp column, found {values.type}", column=column.name, source=source)
        texts = _timestamp_text(values, column, table, key, source)
    elif t is LogicalType.DATE:
        if not pa.types.is_date(values.type):
            raise ContractViolationError(f"expected a date column, found {values.type}", column=column.name, source=source)
        texts = pc.cast(pc.cast(values, pa.date32()), pa.string())
    else:
        if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type) or pa.types.is_fixed_size_binary(values.type)):
            raise ContractViolationError(f"expected a binary column, found {values.type}", column=column.name, source=source)
        texts = _hex(values)
    if values.null_count:
        texts = pc.if_else(values.is_valid(), texts, pa.scalar(NULL_TEXT, pa.string()))
    return texts


def encode_rows(table: pa.Table, contract: Contract, *, source: str | None = None) -> pa.Array:
    """One string per row: the row's canonical line, LF included. Rows keep their order."""
    missing = [name for name in contract.column_names if name not in table.column_names]
    if missing:
        raise ContractViolationError(f"missing column(s) {missing}; the contract declares {contract.column_names}", source=source)
    texts = [encode_column(table.column(c.name), c, table=table, key=contract.key, source=source) for c in contract.columns]
    texts[-1] = pc.binary_join_element_wise(texts[-1], "", "\n")
    if len(texts) == 1:
        return texts[0]
    return pc.binary_join_element_wise(*texts, "\t")


def line_bytes(lines: pa.Array) -> memoryview:
    """The concatenated bytes of an array of row lines, without copying."""
    lines = _as_array(lines)
    if len(lines) == 0:
        return memoryview(b"")
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    offsets = np.frombuffer(lines.buffers()[1], dtype=width)
    start, end = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return memoryview(lines.buffers()[2])[start:end]


def value_text(value: pa.Array, column: Column) -> list[str]:
    """Canonical texts of a few values (partition keys, messages)."""
    table = pa.table({column.name: value})
    return encode_column(value, column, table=table, key=(column.name,)).to_pylist()
