"""Rehearsals over retained models and artifacts (daily: resolvable; weekly: in full), and the integrity scan,
on a real small world."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.services.reproduction.artifacts import produce_artifact
from dsv_platform.services.reproduction.rehearsal import full_rehearsal, integrity_scan, rehearse, retained_models, retained_population
from dsv_platform_tests.fixtures.code_repo import CodeRepo
from dsv_platform_tests.scenarios.reproduce_producer import DATASET, PRODUCER
from dsv_platform_tests.services.reproduce_support import Lab, corrupted


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("rehearsal"))


def test_rehearsal_reports_the_reconstructable_fraction_after_one_is_broken(lab: Lab) -> None:
    builds = [lab.fresh() for _ in range(3)]
    runs = [lab.model(b) for b in builds]
    assert {m.run_hash for m in retained_models(lab.world.registry)} == {r.run_hash for r in runs}
    assert rehearse(lab.platform).fraction == 1.0
    lab.expire(builds[1], delete_objects=False)  # its objects are shared with the others
    run = rehearse(lab.platform)
    assert (len(run.reports), len(run.failures)) == (3, 1)
    assert run.fraction == pytest.approx(2 / 3)
    (failed,) = run.failures
    assert failed.run_hash == runs[1].run_hash and failed.outcome is Outcome.EXPIRED
    assert lab.world.registry.reproduction_records(procedure="rehearsal", limit=3)[0].outcome in {"EXPIRED", "REPRODUCED"}
    # a rotating sample over three days covers every retained model exactly once
    day = dt.date(2026, 7, 1)
    seen = [r.run_hash for d in range(3) for r in rehearse(lab.platform, day=day + dt.timedelta(days=d), period_days=3).reports]
    assert sorted(seen) == sorted(r.run_hash for r in runs)


def test_integrity_scan_quarantines_and_names_the_object(lab: Lab) -> None:
    build = lab.fresh()
    assert build.manifest.splits is not None
    victim = build.manifest.splits.assignment_object
    with corrupted(lab.world.store, victim):
        scan = integrity_scan(lab.platform, period_days=1)
    bad = [f for f in scan.mismatches if f.manifest_hash == build.manifest_hash]
    assert len(bad) == 1 and bad[0].object == victim and bad[0].outcome is Outcome.CORRUPT
    assert lab.state(build) is RealizationState.QUARANTINED
    r = lab.world.registry.find_by_manifest_hash(build.manifest_hash)
    assert r is not None
    assert lab.world.registry.events(r.id)[-1].reason.endswith(f"integrity: object {victim}")  # "quarantine of <ref>: integrity: ..."
    assert all(f.outcome is Outcome.REPRODUCED for f in scan.findings if f.manifest_hash != build.manifest_hash)


def test_full_rehearsal_reproduces_retained_artifacts_and_models_by_weekly_rotation(
    tmp_path: Path, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]
) -> None:
    """The weekly population is every retained model and artifact; an artifact whose input expired is not resolvable
    today, but the full rehearsal rebuilds that input from raw, reruns the report in the recorded environment and
    matches its results; a rotation over two weeks reproduces each exactly once."""
    lab = Lab.create(tmp_path / "lab")
    model_build, report_build = lab.fresh(), lab.fresh()
    model = lab.model(model_build)
    pin = {"repo": str(code_repo.path), "commit": code_repo.commit, "dirty": False}
    report = produce_artifact(lab.platform, PRODUCER, inputs={DATASET: report_build.ref}, parameters={"threshold": "100.00"}, seed=7, code=pin)
    population = retained_population(lab.platform)
    assert [(r.kind, r.target) for r in population] == [("artifact", report.manifest_hash), ("model", model.run_hash)]
    assert {r.target: r.outcome for r in rehearse(lab.platform).reports} == {report.manifest_hash: Outcome.REPRODUCED, model.run_hash: Outcome.REPRODUCED}
    lab.expire(report_build, delete_objects=False)

    daily = rehearse(lab.platform)  # resolvable today? the artifact's pinned input is not
    assert {r.target: r.outcome for r in daily.reports} == {report.manifest_hash: Outcome.EXPIRED, model.run_hash: Outcome.REPRODUCED}
    (dry,) = [r for r in daily.reports if r.kind == "artifact"]
    assert [s.number for s in dry.steps] == [1, 2, 3] and "EXPIRED" in dry.reason and daily.fraction == 0.5
    run = full_rehearsal(lab.platform, day=dt.date(2026, 7, 5), period_weeks=1)
    outcomes = {r.target: r.outcome for r in run.reports}
    assert outcomes == {report.manifest_hash: Outcome.REPRODUCED_AFTER_REBUILD, model.run_hash: Outcome.REPRODUCED}, [r.reason for r in run.reports]
    assert run.fraction == 1.0 and run.to_document()["rebuilt_from_raw"] == 1 and run.procedure == "full_rehearsal"
    (artifact,) = [r for r in run.reports if r.kind == "artifact"]
    assert [s.number for s in artifact.steps] == [1, 2, 3, 4, 5, 6, 7] and artifact.steps[2].failure is Outcome.EXPIRED
    assert {r.outcome for r in lab.world.registry.reproduction_records(procedure="full_rehearsal", limit=2)} == {"REPRODUCED_AFTER_REBUILD", "REPRODUCED"}

    weeks = [full_rehearsal(lab.platform, day=dt.date(2026, 7, 5) + dt.timedelta(weeks=w), period_weeks=2).reports for w in range(2)]
    assert sorted(r.target for week in weeks for r in week) == sorted([report.manifest_hash, model.run_hash])
