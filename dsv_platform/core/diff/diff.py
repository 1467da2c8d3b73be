"""Row-level diff of two tables by key (pure pyarrow/numpy, no loop per row).

Keys are packed into one int64 per row, matched by sort + searchsorted; columns of the
matched rows are compared vectorized (null equals null, NaN equals NaN).

Details: docs/diff.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.errors import DsvError, FailureKind

Indices = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

DEFAULT_EXAMPLES = 10


class DiffError(DsvError):
    """Two realizations cannot be diffed: different keys, a key that is not unique, an unknown label column."""

    kind = FailureKind.NOT_DIFFABLE


@dataclass(frozen=True)
class KeySample:
    """How many rows, and up to N of their keys (JSON values; a dict per row for a multi-column key)."""

    count: int
    examples: tuple[Any, ...] = ()

    def to_document(self) -> dict[str, Any]:
        return {"count": self.count, "examples": list(self.examples)}


@dataclass(frozen=True)
class Flips:
    """Label flips of one column among rows present in both: ``0->1`` and ``1->0``, with example keys."""

    column: str
    up: KeySample
    down: KeySample

    def to_document(self) -> dict[str, Any]:
        return {"column": self.column, "0->1": self.up.to_document(), "1->0": self.down.to_document()}


@dataclass(frozen=True)
class RowDiff:
    """Rows added, removed and changed by key; per-column change counts among rows present in both."""

    key: tuple[str, ...]
    compared_a: int
    compared_b: int
    matched: int
    added: KeySample
    removed: KeySample
    changed: KeySample
    columns: Mapping[str, int]
    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()
    flips: tuple[Flips, ...] = field(default=())


def jsonable(value: object) -> object:
    """A key value as JSON: numbers, strings, booleans and null as they are; anything else (dates, decimals) as text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def sample_keys(table: pa.Table, key: Sequence[str], rows: Indices, limit: int) -> KeySample:
    """``rows`` of ``table`` as a :class:`KeySample`: the count and the keys of the first ``limit`` rows."""
    picked = table.select(list(key)).take(pa.array(rows[: max(limit, 0)]))
    values = picked.to_pylist()
    if len(key) == 1:
        examples = tuple(jsonable(r[key[0]]) for r in values)
    else:
        examples = tuple({k: jsonable(v) for k, v in r.items()} for r in values)
    return KeySample(len(rows), examples)


def _as_int64(values: pa.ChunkedArray) -> npt.NDArray[np.int64] | None:
    """The values as int64 when the type is integer-like (ints, dates, timestamps, durations) and has no nulls."""
    t = values.type
    if values.null_count or not (pa.types.is_integer(t) or pa.types.is_temporal(t)):
        return None
    if pa.types.is_uint64(t):
        return None
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        values = values.cast(pa.int32())
    elif pa.types.is_temporal(t):
        values = values.cast(pa.int64())
    return np.asarray(values.to_numpy(), dtype=np.int64)


def _codes(values: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Identity codes of ``values``: the integer itself, else the index in a hash dictionary (null is its own code)."""
    direct = _as_int64(values)
    if direct is not None:
        return direct
    encoded = pc.dictionary_encode(values.combine_chunks() if values.num_chunks != 1 else values.chunk(0), null_encoding="encode")
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _dense(codes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    return np.unique(codes, return_inverse=True)[1].astype(np.int64)


def packed_keys(a: pa.Table, b: pa.Table, key: Sequence[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """One int64 per row of ``a`` and of ``b``: equal exactly when the rows' keys are equal."""
    packed: npt.NDArray[np.int64] | None = None
    for name in key:
        codes = _codes(pa.chunked_array([*a.column(name).chunks, *b.column(name).chunks], type=a.column(name).type))
        if packed is None:
            packed = codes
            continue
        left, right = _dense(packed), _dense(codes)
        packed = left * (int(right.max(initial=0)) + 1) + right
    assert packed is not None
    return packed[: a.num_rows], packed[a.num_rows :]


def _sorted(keys: npt.NDArray[np.int64], side: str) -> tuple[Indices, npt.NDArray[np.int64]]:
    """The stable sort order of ``keys`` and the sorted keys; a key occurring twice is a :class:`DiffError`."""
    order = np.argsort(keys, kind="stable").astype(np.int64)
    ordered = keys[order]
    if ordered.size > 1 and bool(np.any(ordered[1:] == ordered[:-1])):
        raise DiffError(f"the {side} realization holds a key twice; a diff needs a unique key")
    return order, ordered


def match_keys(ka: npt.NDArray[np.int64], kb: npt.NDArray[np.int64]) -> tuple[Indices, Indices, Indices, Indices]:
    """``(ia, ib, removed, added)``: row pairs with equal keys, rows only in ``a``, rows only in ``b`` (each in key order).

    Both sides are sorted, so the search runs with sorted needles (cache friendly).
    Raises :class:`DiffError` when a key occurs twice on one side.
    """
    oa, sa = _sorted(ka, "first")
    ob, sb = _sorted(kb, "second")
    if sb.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, oa, empty
    pos = np.minimum(np.searchsorted(sb, sa), sb.size - 1)
    hit = sb[pos] == sa
    in_a = np.zeros(sb.size, dtype=np.bool_)
    in_a[pos[hit]] = True
    return oa[hit], ob[pos[hit]], oa[~hit], ob[~in_a]


def _numpy_bool(values: pa.ChunkedArray | pa.Array) -> Mask:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.bool_)


def differs(va: pa.ChunkedArray, vb: pa.ChunkedArray) -> Mask:
    """Per row: do the two values differ? Null equals null and NaN equals NaN; other types are compared after a cast."""
    if va.type != vb.type:
        try:
            vb = vb.cast(va.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            try:
                va, vb = va.cast(pa.string()), vb.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return np.ones(len(va), dtype=np.bool_)
    same = pc.or_(pc.fill_null(pc.equal(va, vb), False), pc.and_(pc.is_null(va), pc.is_null(vb)))
    if pa.types.is_floating(va.type):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(va), pc.is_nan(vb)), False))
    return ~_numpy_bool(same)


def _flip_masks(va: pa.ChunkedArray, vb: pa.ChunkedArray) -> tuple[Mask, Mask]:
    """``0->1`` and ``1->0`` masks of a bool or integer label (null on either side is not a flip)."""
    if pa.types.is_boolean(va.type):
        va, vb = va.cast(pa.int8()), vb.cast(pa.int8())
    a = np.asarray(pc.fill_null(va, -1).to_numpy(), dtype=np.int64)
    b = np.asarray(pc.fill_null(vb, -1).to_numpy(), dtype=np.int64)
    return (a == 0) & (b == 1), (a == 1) & (b == 0)


def label_column_ok(a: pa.Table, b: pa.Table, column: str) -> bool:
    """Can ``column`` be read as a 0/1 label on both sides (bool or integer in both)?"""
    if column not in a.column_names or column not in b.column_names:
        return False
    kinds = [a.schema.field(column).type, b.schema.field(column).type]
    return all(pa.types.is_boolean(t) for t in kinds) or all(pa.types.is_integer(t) for t in kinds)


def diff_rows(a: pa.Table, b: pa.Table, key: Sequence[str], *, label_columns: Sequence[str] = (), examples: int = DEFAULT_EXAMPLES) -> RowDiff:
    """Compare ``a`` and ``b`` row by row on ``key`` (columns both hold are compared; the key itself is not)."""
    missing = [k for k in key if k not in a.column_names or k not in b.column_names]
    if missing:
        raise DiffError(f"key column(s) {missing} missing from one side")
    ka, kb = packed_keys(a, b, key)
    ia, ib, removed, added = match_keys(ka, kb)
    ta, tb = pa.array(ia), pa.array(ib)
    common = [c for c in a.column_names if c in b.column_names and c not in key]
    changed_any = np.zeros(ia.size, dtype=np.bool_)
    counts: dict[str, int] = {}
    for name in common:
        mask = differs(a.column(name).take(ta), b.column(name).take(tb))
        counts[name] = int(mask.sum())
        changed_any |= mask
    flips = []
    for name in label_columns:
        if not label_column_ok(a, b, name):
            raise DiffError(f"label column {name!r} is not a bool or integer column of both realizations")
        up, down = _flip_masks(a.column(name).take(ta), b.column(name).take(tb))
        flips.append(Flips(name, sample_keys(a, key, ia[up], examples), sample_keys(a, key, ia[down], examples)))
    return RowDiff(
        key=tuple(key),
        compared_a=a.num_rows,
        compared_b=b.num_rows,
        matched=int(ia.size),
        added=sample_keys(b, key, added, examples),
        removed=sample_keys(a, key, removed, examples),
        changed=sample_keys(a, key, ia[changed_any], examples),
        columns=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        only_in_a=tuple(c for c in a.column_names if c not in b.column_names),
        only_in_b=tuple(c for c in b.column_names if c not in a.column_names),
        flips=tuple(flips),
    )


@dataclass(frozen=True)
class Reassignments:
    """Examples present in both split assignments whose split differs, counted by ``from->to``."""

    count: int
    moves: Mapping[str, int]
    examples: tuple[Any, ...] = ()
    skipped: bool = False

    def to_document(self) -> dict[str, Any]:
        return {"count": self.count, "moves": dict(self.moves), "examples": list(self.examples), "compared": not self.skipped}


def split_reassignments(a: pa.Table, b: pa.Table, key: Sequence[str], *, examples: int = DEFAULT_EXAMPLES) -> Reassignments:
    """Compare two materialized split assignments (columns ``key`` and ``split``) on ``key``."""
    ka, kb = packed_keys(a, b, key)
    ia, ib, _, _ = match_keys(ka, kb)
    sa = a.column("split").take(pa.array(ia))
    sb = b.column("split").take(pa.array(ib))
    moved = differs(sa, sb)
    rows = ia[moved]
    if not rows.size:
        return Reassignments(0, {})
    pairs = pa.table({"f": sa.filter(pa.array(moved)), "t": sb.filter(pa.array(moved))}).group_by(["f", "t"]).aggregate([([], "count_all")])
    moves = {f"{f}->{t}": int(n) for f, t, n in zip(*(pairs.column(c).to_pylist() for c in ("f", "t", "count_all")), strict=True)}
    return Reassignments(int(rows.size), dict(sorted(moves.items())), sample_keys(a, key, rows, examples).examples)
