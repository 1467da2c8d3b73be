"""Rehearsals over retained models and the integrity scan, on a real small world."""

from __future__ import annotations

import datetime as dt

import pytest

from dsv_platform.core.reproduction import Outcome
from dsv_platform.core.states import RealizationState
from dsv_platform.services.rehearsal import integrity_scan, rehearse, retained_models
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
    assert lab.world.registry.events(r.id)[-1].reason == f"integrity: object {victim}"
    assert all(f.outcome is Outcome.REPRODUCED for f in scan.findings if f.manifest_hash != build.manifest_hash)
