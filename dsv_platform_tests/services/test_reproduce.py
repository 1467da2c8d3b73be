"""The audit procedure on a real small world: bit-for-bit success and each honest failure, each with a record."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_landing
from dsv_platform.core.publication.manifest import CodePin
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.services.reproduction.reproduce import ReproductionReport, reproduce
from dsv_platform_tests.services.reproduce_support import HEAD, Lab, corrupted, drifted_environment


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("reproduce"))


def recorded(lab: Lab, report: ReproductionReport) -> dict[str, object]:
    records = lab.world.registry.reproduction_records(manifest_hash=report.manifest_hash)
    mine = [r for r in records if r.id == report.record_id]
    assert len(mine) == 1, "every audit writes one record"
    assert mine[0].outcome == report.outcome.value and mine[0].actor == lab.world.platform.actor  # the proven identity
    return dict(mine[0].details)


def test_reproduce_fresh_build_bit_for_bit(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.REPRODUCED, report.reason
    assert report.kind == "model" and report.asset_key == "models/fraud_model" and report.rebuilt == ()
    assert report.output is not None and report.output.exact
    details = recorded(lab, report)
    assert details["tolerance_needed"] == "exact"
    assert {"code", "environment", "inputs", "training_rerun"} <= set(details["matched"])  # type: ignore[arg-type]
    by_ref = reproduce(lab.platform, build.ref)
    assert by_ref.outcome is Outcome.REPRODUCED and by_ref.kind == "realization" and by_ref.asset_key == "datasets/fraud_training_set/v6"


def test_reproduce_dirty_build_is_not_reproducible_by_construction(lab: Lab) -> None:
    run = lab.model(lab.fresh(code=CodePin(HEAD, True)))
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.NOT_REPRODUCIBLE_DIRTY
    assert report.output is None, "a dirty build is never 'approximately reproduced'"
    assert recorded(lab, report)["checks"][-1]["step"] == "code"  # type: ignore[index]


def test_reproduce_missing_commit(lab: Lab) -> None:
    run = lab.model(lab.fresh(code=CodePin("0123456789abcdef" * 2 + "01234567", False)))
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.MISSING_COMMIT
    assert "does not exist" in report.reason
    recorded(lab, report)


def test_reproduce_expired_input_is_rebuilt_from_raw(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    lab.expire(build)
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.REPRODUCED_AFTER_REBUILD, report.reason
    assert len(report.rebuilt) == 1 and "EXPIRED" in report.rebuilt[0]
    assert report.output is not None and report.output.exact, "the rerun on rebuilt data matches bit for bit"
    assert recorded(lab, report)["rebuilt"] == list(report.rebuilt)
    dry = reproduce(lab.platform, run.run_hash, rebuild=False)
    assert dry.outcome is Outcome.EXPIRED


def test_reproduce_redacted_input_is_never_rebuilt(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    r = lab.world.registry.find_by_manifest_hash(build.manifest_hash)
    assert r is not None
    lab.world.registry.transition(r.id, RealizationState.REDACTED, reason="subject deletion", actor="tests")
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.REDACTED and report.rebuilt == ()
    recorded(lab, report)


def test_reproduce_corrupted_object_is_named_then_rebuilt(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    victim = build.manifest.partitions[-1].object
    with corrupted(lab.world.store, victim):
        dry = reproduce(lab.platform, run.run_hash, rebuild=False)
        assert dry.outcome is Outcome.CORRUPT
        assert victim in dry.reason
        recorded(lab, dry)
        full = reproduce(lab.platform, run.run_hash)
    assert full.outcome is Outcome.REPRODUCED_AFTER_REBUILD, full.reason
    assert "CORRUPT" in full.rebuilt[0]


def test_reproduce_changed_environment_says_what_differs(lab: Lab) -> None:
    run = lab.model(lab.fresh(environment=drifted_environment(lab.world.store)))
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.ENVIRONMENT_DRIFT
    assert report.environment is not None and set(report.environment.changed) == {"numpy"}
    assert report.environment.changed["numpy"][0] == "0.0.1"
    assert "numpy 0.0.1 ->" in recorded(lab, report)["environment"]["summary"]  # type: ignore[index]
    assert report.output is not None and report.output.exact, "the output still matched; the drift is what is reported"


def test_reproduce_unknown_hash_is_not_found(lab: Lab) -> None:
    report = reproduce(lab.platform, "sha256:" + "ab" * 32)
    assert report.outcome is Outcome.NOT_FOUND
    assert lab.world.registry.reproduction_records(limit=50)[0].outcome in {o.value for o in Outcome}


def test_reproduce_expired_input_with_raw_gone(tmp_path: Path) -> None:
    lab = Lab.create(tmp_path)
    build = lab.fresh()
    run = lab.model(build)
    lab.expire(build)
    zone = build_landing(lab.settings)
    for record in zone.records():
        zone.store.delete(record.digest)  # raw batches land sealed: delete through the landing zone's store
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.EXPIRED
    assert "raw batch" in report.reason and "gone" in report.reason
    recorded(lab, report)
