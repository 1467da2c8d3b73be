"""Distribution statistics for the semantic rules: quantiles, drift against a baseline, volume change.

Numeric drift is the relative change of a quantile (p01, p50, p99); categorical
drift is the population stability index (PSI) or the total variation distance of
the category frequencies. Volume change is the relative change of the mean rows
per partition. ``None`` means "no baseline to compare with". Pure and vectorized.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.semantic import QUANTILES

PSI_EPSILON = 1e-4
"""Floor of a category frequency in the PSI (a category absent on one side would otherwise be infinite)."""


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
    nums = pc.drop_null(pc.if_else(pc.is_nan(nums), None, nums))
    if len(nums) == 0:
        return None
    out = pc.quantile(nums, q=[q], interpolation="linear").to_pylist()[0]
    return float(out) if out is not None else None


def relative_change(current: float | None, base: float | None) -> float | None:
    if current is None or base is None:
        return None
    scale = max(abs(base), 1e-12)
    return abs(current - base) / scale


def frequencies(values: pa.ChunkedArray | pa.Array) -> dict[object, float]:
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
