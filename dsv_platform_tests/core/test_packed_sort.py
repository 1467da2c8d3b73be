"""``stable_sort`` gives numpy's stable argsort, through the packed sort or its fallback."""

from __future__ import annotations

import numpy as np
import pytest

from dsv_platform.core.identity.packed_sort import stable_sort


@pytest.mark.parametrize(
    "values",
    [
        np.array([], dtype=np.int64),
        np.array([5], dtype=np.int64),
        np.array([3, -1, 3, 0, -1, 3], dtype=np.int64),  # ties keep row order
        np.random.default_rng(1).integers(-1000, 1000, 5000),
        np.random.default_rng(2).permutation(4097).astype(np.int64),
        np.array([-(2**63), 2**63 - 1, 0, 0, -5], dtype=np.int64),  # the span leaves no room: the stable argsort
    ],
)
def test_stable_sort_equals_the_stable_argsort(values: np.ndarray) -> None:
    ordered, order = stable_sort(values)
    expected = np.argsort(values, kind="stable")
    assert order.tolist() == expected.tolist()
    assert ordered.tolist() == values[expected].tolist()
    assert ordered.dtype == np.int64 and order.dtype == np.int64
