"""Distribution statistics for the semantic rules: quantiles, drift against a baseline, volume change.

Numeric drift is the relative change of a quantile (p01, p50, p99); categorical
drift is the population stability index (PSI) or the total variation distance of
the category frequencies. Volume change is the relative change of the mean rows
per partition. ``None`` means "no baseline to compare with". Pure and vectorized.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts.semantic import QUANTILES

PSI_EPSILON = 1e-4
"""Floor of a category frequency in the PSI (a category absent on one side would otherwise be infinite)."""


_SHARED: ContextVar[dict[tuple[object, ...], tuple[object, Any]] | None] = ContextVar("dsv_drift_shared", default=None)


@contextmanager
def shared_statistics() -> Iterator[None]:
    """Within the block, each column's quantiles and frequencies are computed once, whatever the number of rules reading them."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _data_identity(values: pa.ChunkedArray | pa.Array) -> tuple[object, ...]:
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    return (str(values.type), len(values), tuple((c.offset, len(c), tuple(b.address if b is not None else 0 for b in c.buffers())) for c in chunks))


def _shared(values: pa.ChunkedArray | pa.Array, what: str, compute: Callable[[], Any]) -> Any:
    memo = _SHARED.get()
    if memo is None:
        return compute()
    key = (what, _data_identity(values))
    if key not in memo:
        memo[key] = (values, compute())  # the values are kept alive: their buffer addresses stay theirs
    return memo[key][1]


def as_float(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array | None:
    """``values`` as float64 (integers, floats, decimals), or ``None`` for a non-numeric column."""
    t = values.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pc.cast(values, pa.float64())
    return None


def quantile(values: pa.ChunkedArray | pa.Array, q: float) -> float | None:
    """The ``q`` quantile (linear interpolation, nulls and NaN skipped), ``None`` when there are no values."""
    nums = as_float(values)
    if nums is None:
        return None
    if q in QUANTILES.values():
        shared: dict[float, float | None] = _shared(values, "quantiles", lambda: _quantiles(nums, tuple(QUANTILES.values())))
        return shared[q]
    return _quantiles(nums, (q,))[q]


def _quantiles(nums: pa.ChunkedArray | pa.Array, qs: tuple[float, ...]) -> dict[float, float | None]:
    nums = pc.drop_null(pc.if_else(pc.is_nan(nums), None, nums))
    if len(nums) == 0:
        return dict.fromkeys(qs)
    out = pc.quantile(nums, q=list(qs), interpolation="linear").to_pylist()
    return {q: float(v) if v is not None else None for q, v in zip(qs, out, strict=True)}


def relative_change(current: float | None, base: float | None) -> float | None:
    if current is None or base is None:
        return None
    scale = max(abs(base), 1e-12)
    return abs(current - base) / scale


def frequencies(values: pa.ChunkedArray | pa.Array) -> dict[object, float]:
    """Each category's share of the rows (null is a category)."""
    result: dict[object, float] = _shared(values, "frequencies", lambda: _frequencies(values))
    return result


def _frequencies(values: pa.ChunkedArray | pa.Array) -> dict[object, float]:
    counts = pc.value_counts(values)
    keys = counts.field("values").to_pylist()
    n = np.asarray(counts.field("counts").to_numpy(zero_copy_only=False), dtype=float)
    total = n.sum()
    return {k: float(c / total) for k, c in zip(keys, n, strict=True)} if total else {}


def category_distance(current: pa.ChunkedArray | pa.Array, base: pa.ChunkedArray | pa.Array, *, measure: str) -> float | None:
    """PSI (``measure="psi"``) or total variation (``"tv"``) between the category frequencies (null is a category)."""
    p, q = frequencies(current), frequencies(base)
    if not p or not q:
        return None
    keys = list(dict.fromkeys([*q, *p]))
    pv = np.array([p.get(k, 0.0) for k in keys])
    qv = np.array([q.get(k, 0.0) for k in keys])
    if measure == "tv":
        return float(0.5 * np.abs(pv - qv).sum())
    pv, qv = np.maximum(pv, PSI_EPSILON), np.maximum(qv, PSI_EPSILON)
    return float(((pv - qv) * np.log(pv / qv)).sum())


def drift_of(rule: str, current: pa.ChunkedArray, base: pa.ChunkedArray | None) -> float | None:
    """The observed drift for ``rule`` (``drift_p99``, ``drift_psi``, ``drift_tv``, ...), ``None`` without a baseline."""
    if base is None:
        return None
    kind = rule.removeprefix("drift_")
    if kind in QUANTILES:
        return relative_change(quantile(current, QUANTILES[kind]), quantile(base, QUANTILES[kind]))
    return category_distance(current, base, measure=kind)


def rows_per_partition(table: pa.Table, partition_by: str | None) -> float:
    if partition_by is None or partition_by not in table.column_names or table.num_rows == 0:
        return float(table.num_rows)
    return float(table.num_rows / max(len(pc.unique(table.column(partition_by))), 1))


def volume_change(table: pa.Table, baseline: pa.Table | None, partition_by: str | None) -> float | None:
    """Relative change of the mean rows per partition against ``baseline`` (``None`` without one)."""
    if baseline is None:
        return None
    return relative_change(rows_per_partition(table, partition_by), rows_per_partition(baseline, partition_by))
