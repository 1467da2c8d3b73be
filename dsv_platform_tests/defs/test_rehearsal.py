"""The rehearsal and integrity assets materialize with local resources; a broken model fails the check with its reason;
the weekly full rehearsal reproduces what the daily one only resolves."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.cli.runs import asset_metadata
from dsv_platform.defs import build_defs
from dsv_platform.defs.rehearsal import FULLY_REPRODUCED, INTEGRITY, RECONSTRUCTABLE, SLOS_MET, dataset_observability, realization_integrity, reconstructability
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
    scheduled = {s.name: s.job_name for s in defs.schedules or () if isinstance(s, dg.ScheduleDefinition)}
    wanted = {"rehearsal_schedule": "rehearsal_job", "integrity_scan_schedule": "integrity_scan_job"}
    assert {k: scheduled.get(k) for k in wanted} == wanted
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([reconstructability], resources=defs.resources, instance=instance, raise_on_error=False)
    assert not result.success, "a failed blocking check fails the run"
    (mat,) = result.asset_materializations_for_node("reconstructability")
    assert mat.metadata["reconstructable_fraction"].value == pytest.approx(2 / 3)
    (check,) = [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert check.check_name == RECONSTRUCTABLE and not check.passed  # type: ignore[union-attr]
    assert "EXPIRED" in check.metadata["reasons"].value  # type: ignore[union-attr]
    observations = instance.fetch_observations(dg.AssetKey.from_user_string("models/fraud_model"), limit=10).records
    assert len(observations) == 3

    ok = dg.materialize([realization_integrity, dataset_observability], resources=defs.resources, instance=instance)
    assert ok.success
    checks = [e.event_specific_data for e in ok.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert sorted(c.check_name for c in checks) == sorted([INTEGRITY, SLOS_MET]) and all(c.passed for c in checks)  # type: ignore[union-attr]


def test_full_rehearsal_job_reproduces_the_retained_sample_and_records_the_fully_reproduced_fraction(tmp_path: Path) -> None:
    """Weekly: an expired training set is rebuilt from raw and the model retrained, so it is fully reproduced though
    the daily rehearsal finds it unresolvable; each job records its own series on a persistent Dagster instance."""
    lab = Lab.create(tmp_path / "lab")
    builds = [lab.fresh() for _ in range(2)]
    runs = [lab.model(b) for b in builds]
    lab.expire(builds[0], delete_objects=False)
    defs = build_defs(lab.settings)
    assert defs.resolve_schedule_def("full_rehearsal_schedule").cron_schedule == "0 6 * * 0"  # weekly
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        daily = defs.resolve_job_def("rehearsal_job").execute_in_process(instance=instance, raise_on_error=False)
        weekly = defs.resolve_job_def("full_rehearsal_job").execute_in_process(
            instance=instance, run_config={"ops": {"full_reproducibility": {"config": {"period_weeks": 1}}}}
        )
        assert not daily.success and weekly.success
        assert asset_metadata(daily, "reconstructability")["reconstructable_fraction"] == pytest.approx(0.5)
        meta = asset_metadata(weekly, "full_reproducibility")
        assert (meta["fully_reproduced_fraction"], meta["reproduced"], meta["retained"], meta["rebuilt_from_raw"]) == (1.0, 2, 2, 1)
        (check,) = weekly.get_asset_check_evaluations()
        assert check.check_name == FULLY_REPRODUCED and check.passed
        stored = instance.fetch_materializations(dg.AssetKey.from_user_string("full_reproducibility"), limit=5).records
        assert [r.asset_materialization.metadata["fully_reproduced_fraction"].value for r in stored] == [1.0]  # type: ignore[union-attr]
        observed = instance.fetch_observations(dg.AssetKey.from_user_string("models/fraud_model"), limit=10).records
        assert sum("full_rehearsal" in (o.event_log_entry.asset_observation.description or "") for o in observed) == 2  # type: ignore[union-attr]
    records = lab.world.registry.reproduction_records(procedure="full_rehearsal", limit=5)
    assert {(r.manifest_hash, r.outcome) for r in records} == {
        (builds[0].manifest_hash, "REPRODUCED_AFTER_REBUILD"),
        (builds[1].manifest_hash, "REPRODUCED"),
    }, [r.details for r in records]
    assert {r.details["run_hash"] for r in records} == {r.run_hash for r in runs}
