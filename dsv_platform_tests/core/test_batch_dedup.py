"""Exact duplicate rows of a batch with float columns: dropped in Arrow, exactly as comparing the rows in Python does."""

import math

import pyarrow as pa

from dsv_platform.core.ingest.batch import _drop_duplicates_by_rows, _drop_exact_duplicates


def test_float_rows_deduplicate_as_python_compares_them():
    raw = pa.table({
        "id": pa.array(["a", "a", "b", "b", "c", "c", "d", "d", "e"]),
        "x": pa.array([1.5, 1.5, -0.0, 0.0, math.nan, math.nan, None, None, 2.0]),
    })  # fmt: skip
    vectorized, dropped = _drop_exact_duplicates(raw)
    by_rows, dropped_by_rows = _drop_duplicates_by_rows(raw)
    assert dropped == dropped_by_rows == 3  # a, b (-0.0 == 0.0, the first kept), d (null == null); NaN rows stay
    assert vectorized.to_pylist() == by_rows.to_pylist() or str(vectorized.to_pylist()) == str(by_rows.to_pylist())
    assert [r["id"] for r in vectorized.to_pylist()] == ["a", "b", "c", "c", "d", "e"]
    assert math.copysign(1.0, vectorized.column("x")[1].as_py()) == -1.0  # the first occurrence, -0.0, is the one kept
