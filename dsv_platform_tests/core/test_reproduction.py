"""The audit's pure rules: verdict precedence, output tolerance, environment diff, rotating coverage."""

from __future__ import annotations

import pytest

from dsv_platform.core.reproduction.reproduction import (
    Check,
    Outcome,
    Tolerance,
    compare_outputs,
    decide,
    diff_environments,
    reconstructable_fraction,
    rotating_sample,
)


def test_reproduction_decide_takes_the_most_damning_failure() -> None:
    drift = Check("environment", False, Outcome.ENVIRONMENT_DRIFT)
    dirty = Check("code", False, Outcome.NOT_REPRODUCIBLE_DIRTY)
    assert decide([Check("inputs", True), drift, dirty]) is Outcome.NOT_REPRODUCIBLE_DIRTY
    assert decide([Check("inputs", True)], rebuilt=["x"]) is Outcome.REPRODUCED_AFTER_REBUILD
    assert decide([Check("inputs", True)]) is Outcome.REPRODUCED


def test_reproduction_compare_outputs_exact_or_within_tolerance() -> None:
    m = {"auc_bp": 9000, "log_loss": "0.1"}
    assert compare_outputs("w", m, "w", m, Tolerance()).exact
    off = {"auc_bp": 9003, "log_loss": "0.2"}
    assert not compare_outputs("w", m, "v", off, Tolerance()).matched
    within = compare_outputs("w", m, "v", off, Tolerance(exact=False, metrics_bp={"auc_bp": 5}))
    assert within.matched and not within.exact and within.needed_bp == {"auc_bp": 3}


def test_reproduction_diff_environments_names_packages() -> None:
    d = diff_environments("a" * 64, "3.11", "b" * 64, "3.11", "numpy==1\npandas==2", "numpy==2\npyarrow==3")
    assert d.changed == {"numpy": ("1", "2")} and d.added == ("pyarrow",) and d.removed == ("pandas",)
    assert "numpy 1 -> 2" in d.summary()


@pytest.mark.parametrize("period", [1, 3, 7])
def test_reproduction_rotating_sample_covers_everything_once_per_period(period: int) -> None:
    items = list(range(10))
    seen = [x for day in range(100, 100 + period) for x in rotating_sample(items, day, period)]
    assert sorted(seen) == items
    assert reconstructable_fraction([Outcome.REPRODUCED, Outcome.EXPIRED]) == 0.5
