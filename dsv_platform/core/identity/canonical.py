"""Canonical row text, `dsv-canon/1` (docs/canonical-encoding.md), vectorized over Arrow.

Each column becomes an Arrow string array of canonical value texts; the
columns are joined by TAB and every row ends in LF, with no Python loop per row
except for a few exactly formatted edge values.
The optional compiled path lives in :mod:`dsv_platform.core.identity.canonical_native`.

Details: docs/hashing.md
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.errors import ContractViolationError

NULL_TEXT = "\\N"
_ESCAPES = (("\\", "\\\\"), ("\b", "\\b"), ("\f", "\\f"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\v", "\\v"))
_NEEDS_ESCAPE = "[\\\\\\x08\\x0c\\n\\r\\t\\x0b]"
_ESCAPE_LETTER = np.arange(256, dtype=np.uint8)
for _raw, _escaped in _ESCAPES:
    _ESCAPE_LETTER[ord(_raw)] = ord(_escaped[1])
_HEX = np.array([f"{i:02x}".encode() for i in range(256)], dtype="S2").view(np.uint16)
_UNIT_EXP = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_INT64_SAFE = float(2**52)


def row_key_at(table: pa.Table, key: tuple[str, ...], index: int) -> object:
    """The natural key of row ``index``, for error messages."""
    values = tuple(_py_value(table.column(k), index) for k in key)
    return values[0] if len(values) == 1 else values


def _py_value(values: pa.ChunkedArray | pa.Array, index: int) -> object:
    """``values[index]`` as a Python value; a timestamp or date outside Python's range as its integer count."""
    scalar = values[index]
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return scalar.cast(pa.int64()).as_py()


def _first_true(mask: pa.ChunkedArray | pa.Array) -> int:
    return int(np.flatnonzero(np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False)))[0])


def _as_array(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def _string_buffers(strings: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets rebased to 0 as int64, data bytes) of a string/binary array, without copying the data."""
    width = np.int64 if pa.types.is_large_string(strings.type) or pa.types.is_large_binary(strings.type) else np.int32
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=width)[strings.offset : strings.offset + n + 1] if n else np.zeros(1, width)
    start, end = int(offsets[0]), int(offsets[-1])
    data_buf = strings.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None and end > start else np.empty(0, np.uint8)
    return offsets.astype(np.int64) - start, data


def _special_positions(data: np.ndarray) -> np.ndarray:
    """Positions of the bytes COPY text escapes: 0x08-0x0D and backslash (in 1 MiB blocks, cache-friendly)."""
    found = []
    block = 1 << 20
    for start in range(0, len(data), block):
        part = data[start : start + block]
        mask = np.less(part - np.uint8(8), np.uint8(6))
        mask |= part == np.uint8(92)
        if mask.any():
            found.append(np.flatnonzero(mask) + start)
    return np.concatenate(found) if found else np.empty(0, np.int64)


def _escape_slow(strings: pa.Array) -> pa.Array:
    if pc.any(pc.match_substring_regex(strings, _NEEDS_ESCAPE)).as_py():
        for raw, escaped in _ESCAPES:
            strings = pc.replace_substring(strings, raw, escaped)
    return strings


def _escape(strings: pa.Array) -> pa.Array:
    """COPY text escapes of a string array: each special byte becomes a backslash and its letter."""
    offsets, data = _string_buffers(strings)
    positions = _special_positions(data)
    if not len(positions):
        return strings
    if len(data) + len(positions) >= 2**31 or not pa.types.is_string(strings.type):
        return _escape_slow(strings)
    out = np.insert(data, positions, np.uint8(92))
    out[positions + np.arange(1, len(positions) + 1)] = _ESCAPE_LETTER[data[positions]]
    new_offsets = (offsets + np.searchsorted(positions, offsets, side="left")).astype(np.int32)
    validity = strings.is_valid().buffers()[1] if strings.null_count else None
    return pa.Array.from_buffers(
        pa.string(), len(strings), [validity, pa.py_buffer(new_offsets), pa.py_buffer(out)], null_count=strings.null_count
    )


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
    with localcontext() as ctx:
        ctx.prec = 200  # decimal256 holds up to 76 digits; quantize must never round
        return _plain_decimal_text_exact(value, scale)


def _plain_decimal_text_exact(value: Decimal, scale: int) -> str:
    text = format(value.quantize(Decimal(1).scaleb(-scale)) if scale else value.quantize(Decimal(1)), "f")
    return text[1:] if text.startswith("-") and Decimal(text) == 0 else text


def _fixed_point_text(unscaled: np.ndarray, scale: int) -> pa.Array:
    """Plain text of int64 ``unscaled`` values with ``scale`` implied fraction digits (|unscaled| < 10**18)."""
    if scale == 0:
        return pc.cast(pa.array(unscaled, pa.int64()), pa.string())
    unit = 10**scale
    below_one = (unscaled > -unit) & (unscaled < unit)
    any_below = bool(below_one.any())
    if any_below:
        # |x| < 1: print |v| + 10**scale (exactly scale+1 digits) and turn its leading 1 into 0.
        unscaled = np.where(below_one, np.where(unscaled < 0, unscaled - unit, unscaled + unit), unscaled)
    texts = pc.cast(pa.array(unscaled, pa.int64()), pa.string())
    offsets, data = _string_buffers(texts)
    n = len(unscaled)
    out = np.insert(data, offsets[1:] - scale, np.uint8(46))
    if any_below:
        rows = np.flatnonzero(below_one)
        out[offsets[rows] + rows + (unscaled[rows] < 0)] = np.uint8(48)
    new_offsets = (offsets + np.arange(n + 1)).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(new_offsets), pa.py_buffer(out)], null_count=0)


def _decimal_text(values: pa.Array, scale: int) -> pa.Array:
    if pa.types.is_decimal128(values.type) and values.type.precision <= 18 and len(values):
        words = np.frombuffer(values.buffers()[1], dtype=np.int64).reshape(-1, 2)[values.offset : values.offset + len(values)]
        low, high = words[:, 0], words[:, 1]
        if values.null_count:
            valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False))
            low, high = np.where(valid, low, 0), np.where(valid, high, 0)
        if np.array_equal(high, low >> 63) and bool(((low > -(10**18)) & (low < 10**18)).all()):
            return _fixed_point_text(low, scale)
    return _decimal_text_slow(values, scale)


def _decimal_text_slow(values: pa.Array, scale: int) -> pa.Array:
    texts = pc.cast(values, pa.string())
    sci = pc.match_substring(texts, "E")
    if pc.any(sci).as_py():
        idx = np.flatnonzero(pc.fill_null(sci, False).to_numpy(zero_copy_only=False))
        fixed = [_plain_decimal_text(values[int(i)].as_py(), scale) for i in idx]
        py = texts.to_pylist()
        for i, text in zip(idx, fixed, strict=True):
            py[int(i)] = text
        texts = pa.array(py, pa.string())
    return texts


def _unscaled_to_text(unscaled: np.ndarray, validity: pa.Array | None, scale: int) -> pa.Array:
    """Format int64 unscaled values with ``scale`` implied fraction digits."""
    if scale <= 18:
        return _fixed_point_text(unscaled, scale)
    n = len(unscaled)
    words = np.empty((n, 2), dtype=np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    dec = pa.Array.from_buffers(pa.decimal128(38, scale), n, [None, pa.py_buffer(words)])
    return _decimal_text_slow(dec, scale)


def _float_text(values: pa.Array, scale: int) -> pa.Array:
    x = np.asarray(pc.fill_null(pc.cast(values, pa.float64()), 0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    finite = np.isfinite(x)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * (10.0**scale)
        r = np.rint(y)
        frac = np.abs(y - np.floor(y) - 0.5)
        margin = np.abs(y) * 2.0**-49 + 2.0**-1000
    fast = finite & (np.abs(y) < _INT64_SAFE) & (frac > margin) & (scale <= 18)
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
                text = f"{v:.{scale}f}"
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
            count = ints[i].as_py()
            try:
                value: object = values[i].as_py()
                shown = str(values[i])
            except (OverflowError, ValueError):  # outside Python's datetime range: name the integer count
                value, shown = count, f"{count} {unit} since 1970-01-01T00:00:00Z"
            raise ContractViolationError(
                f"timestamp {shown} is not a whole number of {column.resolution} (stored at {unit}); refusing to truncate",
                column=column.name,
                value=value,
                row_key=row_key_at(table, key, i),
                source=source,
            )
        ints = pc.divide(ints, factor)
    elif shift < 0:
        # A coarser stored unit: append the zeros as text, so the count stays exact past int64.
        texts = pc.cast(ints, pa.string())
        return pc.if_else(pc.equal(ints, 0), "0", pc.binary_join_element_wise(texts, "0" * (-shift), ""))
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
    return join_lines(texts)


def join_lines(texts: list[pa.Array]) -> pa.Array:
    """Row lines from column texts (no nulls): TAB between fields, LF at the end of every line.

    One join kernel with a trailing empty field (each line ends in TAB), then
    the last byte of every line is overwritten by LF in the fresh buffer.
    """
    lines = pc.binary_join_element_wise(*texts, pa.scalar("", texts[0].type), "\t")
    if len(lines) == 0:
        return lines
    offsets, data = _string_buffers(lines)
    if data.flags.writeable:
        data[offsets[1:] - 1] = 10
        return lines
    data = data.copy()
    data[offsets[1:] - 1] = 10
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    buffers = [None, pa.py_buffer(offsets.astype(width)), pa.py_buffer(data)]
    return pa.Array.from_buffers(lines.type, len(lines), buffers, null_count=0)


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
    texts: list[str] = encode_column(value, column, table=table, key=(column.name,)).to_pylist()
    return texts
