"""The rehearsal and integrity assets materialize with local resources; a broken model fails the check with its reason."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.defs import build_defs
from dsv_platform.defs.rehearsal import INTEGRITY, RECONSTRUCTABLE, dataset_observability, realization_integrity, reconstructability
from dsv_platform_tests.services.reproduce_support import Lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("defs_rehearsal"))


def test_rehearsal_job_reports_fraction_and_fails_check_with_reason(lab: Lab, tmp_path: Path) -> None:
    builds = [lab.fresh() for _ in range(3)]
    for b in builds:
        lab.model(b)
    lab.expire(builds[0], delete_objects=False)
    defs = build_defs(lab.settings)
    assert defs.resolve_job_def("rehearsal_job") is not None and defs.resolve_job_def("integrity_scan_job") is not None
    assert {s.name for s in defs.schedules} >= {"rehearsal_schedule", "integrity_scan_schedule"}  # type: ignore[union-attr]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([reconstructability], resources=defs.resources, instance=instance, raise_on_error=False)
    assert not result.success, "a failed blocking check fails the run"
    (mat,) = result.asset_materializations_for_node("reconstructability")
    assert mat.metadata["reconstructable_fraction"].value == pytest.approx(2 / 3)
    (check,) = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert check.check_name == RECONSTRUCTABLE and not check.passed  # type: ignore[union-attr]
    assert "EXPIRED" in check.metadata["reasons"].value  # type: ignore[union-attr]
    observations = instance.fetch_observations(dg.AssetKey("fraud_model"), limit=10).records
    assert len(observations) == 3

    ok = dg.materialize([realization_integrity, dataset_observability], resources=defs.resources, instance=instance)
    assert ok.success
    checks = [e.event_specific_data for e in ok.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert [c.check_name for c in checks] == [INTEGRITY] and checks[0].passed  # type: ignore[union-attr]
