"""`dsv reproduce` on an artifact: the seven steps in a worktree of the recorded commit and a venv from its lock.

Failure modes: an environment drift (today's packages differ from the recorded lock) is harmless; a
dirty checkout at production time is not reproducible by construction; an expired input is rebuilt from raw.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv_platform.adapters.registry.artifacts import RunRecords
from dsv_platform.cli.main import main
from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.core.reproduction.reproduction_steps import TITLES
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.reproduction.artifacts import ArtifactRun, produce_artifact
from dsv_platform.services.reproduction.code_pins import checkout_of
from dsv_platform.services.reproduction.envbuild import lock_pins
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform.services.reproduction.reproduce import ReproductionReport, reproduce
from dsv_platform_tests.fixtures.code_repo import CodeRepo, git
from dsv_platform_tests.scenarios.reproduce_producer import DATASET, PRODUCER
from dsv_platform_tests.services.reproduce_support import Lab

PARAMETERS = {"threshold": "100.00"}
ALL_PASSED = [(1, "passed"), (2, "passed"), (3, "passed"), (4, "passed"), (5, "passed"), (6, "skipped"), (7, "passed")]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("reproduce_artifact"))


def produce(lab: Lab, code: dict[str, object]) -> ArtifactRun:
    build = lab.fresh()
    return produce_artifact(lab.platform, PRODUCER, inputs={DATASET: build.ref}, parameters=PARAMETERS, seed=7, code=code)


def statuses(report: ReproductionReport) -> list[tuple[int, str]]:
    return [(s.number, s.status.value) for s in report.steps]


def dsv(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    monkeypatch.setenv("DSV_HOME", str(lab.settings.home))
    monkeypatch.setenv("DSV_ACTOR", "auditor")
    code = main(list(args))
    return code, capsys.readouterr().out


def test_reproduce_artifact_seven_steps_bit_for_bit(
    lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = produce(lab, {"repo": str(code_repo.path), "commit": code_repo.commit, "dirty": False})
    code, out = dsv(lab, monkeypatch, capsys, "reproduce", run.manifest_hash[:16])
    assert code == 0, out
    printed = [re.sub(r"\s+", " ", line.split(":")[0].strip()) for line in out.splitlines()[1:8]]
    assert printed == [f"{n}. {'skip' if n == 6 else 'ok'} {title}" for n, title in TITLES.items()]
    assert out.splitlines()[-1].startswith("  verdict: REPRODUCED (reproduction record ")
    records = lab.world.registry.reproduction_records(manifest_hash=run.manifest_hash)
    details = records[0].details
    assert (records[0].outcome, records[0].actor) == ("REPRODUCED", "admin")  # the proven identity, not DSV_ACTOR (#24 item 6)
    assert [(s["step"], s["status"]) for s in details["steps"]] == ALL_PASSED
    assert details["steps"][4]["detail"]["results"] == run.results, "the rerun's results are the recorded ones, bit for bit"
    assert details["steps"][3]["detail"]["loaded"] == run.manifest["environment"]["tz_database"]
    restored = details["environment_restored"]
    assert restored["venv_differs_from_lock"] == {}, "the rerun ran in a venv that is exactly the recorded lock"
    assert not restored["venv"].startswith(sys.prefix)
    lineage = subprocess.run(["git", "-C", str(code_repo.path), "worktree", "list"], capture_output=True, text=True, check=True).stdout
    assert len(lineage.splitlines()) == 1, "the temporary worktree is removed"


def test_reproduce_artifact_by_name_writes_a_lineage_activity(
    lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = produce(lab, {"repo": str(code_repo.path), "commit": code_repo.commit, "dirty": False})
    report = reproduce(lab.platform, PRODUCER.name, actor="auditor")
    assert report.outcome is Outcome.REPRODUCED and report.manifest_hash == run.manifest_hash, report.reason
    mine = [a for a in RunRecords(lab.world.registry).activities([("artifact", run.manifest_hash)]) if a.kind == "reproduction"]
    assert mine and mine[-1].record["record_id"] == report.record_id and mine[-1].record["outcome"] == "REPRODUCED"
    code, out = dsv(lab, monkeypatch, capsys, "lineage", f"artifact:{run.manifest_hash}")
    assert code == 0 and f"activity #{mine[-1].id} reproduction on artifact:{run.manifest_hash}" in out, out


def produce_with_pin(lab: Lab, code_repo: CodeRepo, package: str, version: str) -> ArtifactRun:
    """An artifact produced today at a commit whose lock pins ``package==version`` (another version than today's venv has)."""
    lock = code_repo.lock().decode()
    assert lock_pins(lock.encode())[package] != version
    uv = str(Path(sys.executable).parent / "uv")
    compile_one = [uv, "pip", "compile", "-", "--no-deps", "--generate-hashes", "--python-version", "3.11", "--no-header", "--no-annotate"]
    block = subprocess.run(compile_one, input=f"{package}=={version}\n", capture_output=True, text=True, check=True).stdout
    drifted = re.sub(rf"^{package}==.*?(?=^\S)", lambda _m: block, lock, count=1, flags=re.M | re.S)
    commit = code_repo.commit_change("requirements.lock", drifted.encode(), f"{package} {version}")
    try:
        return produce(lab, {"repo": str(code_repo.path), "commit": commit, "dirty": False})
    finally:
        code_repo.checkout(code_repo.commit)


def test_reproduce_artifact_environment_drift_is_harmless(lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]) -> None:
    """Produced at a commit whose lock pins tqdm 4.67.0 while today's venv has another tqdm: the reproduction uses the lock."""
    today = lock_pins(code_repo.lock())["tqdm"]
    run = produce_with_pin(lab, code_repo, "tqdm", "4.67.0")
    report = reproduce(lab.platform, run.manifest_hash)
    assert report.outcome is Outcome.REPRODUCED, report.reason
    assert statuses(report) == ALL_PASSED
    restored = report.extra["environment_restored"]
    assert restored["today_differs_from_lock"] == {"tqdm": ["4.67.0", today]}, "the record says which packages differ from today's"
    assert restored["venv_differs_from_lock"] == {}, "the venv is the recorded lock: tqdm 4.67.0"
    assert "differs from the lock in 1 package(s), unused" in report.steps[1].summary


def test_reproduce_artifact_from_a_dirty_checkout_is_not_reproducible_by_construction(
    lab: Lab, code_repo: CodeRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch = code_repo.path / "scratch.txt"
    scratch.write_text("uncommitted\n")
    try:
        pin = checkout_of(code_repo.path)
        assert pin["dirty"] is True and pin["commit"] == code_repo.commit
        run = produce(lab, pin)
    finally:
        scratch.unlink()
    code, out = dsv(lab, monkeypatch, capsys, "reproduce", run.manifest_hash)
    assert code == 1
    assert "2. FAIL restore the code and the environment: not reproducible by construction: the artifact was produced from a dirty checkout" in out
    assert out.count(" skip ") == 4 and "verdict: NOT_REPRODUCIBLE_DIRTY" in out.splitlines()[-1]
    details = lab.world.registry.reproduction_records(manifest_hash=run.manifest_hash)[0].details
    assert [(s["step"], s["status"]) for s in details["steps"]] == [(1, "passed"), (2, "failed")] + [(n, "skipped") for n in (3, 4, 5, 6)] + [(7, "passed")]
    assert "environment_restored" not in details, "nothing was rerun or approximated"


def test_reproduce_artifact_expired_input_is_rebuilt_from_raw(lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]) -> None:
    build = lab.fresh()
    run = produce_artifact(lab.platform, PRODUCER, inputs={DATASET: build.ref}, parameters=PARAMETERS, seed=7,
                           code={"repo": str(code_repo.path), "commit": code_repo.commit, "dirty": False})  # fmt: skip
    lab.expire(build)
    report = reproduce(lab.platform, run.manifest_hash)
    assert report.outcome is Outcome.REPRODUCED_AFTER_REBUILD, report.reason
    assert statuses(report) == [(1, "passed"), (2, "passed"), (3, "failed"), (4, "passed"), (5, "skipped"), (6, "passed"), (7, "passed")]
    assert "EXPIRED" in report.steps[2].summary and build.manifest_hash in report.steps[2].summary, "step 3 names what changed"
    assert len(report.rebuilt) == 1 and "rebuilt from" in report.rebuilt[0] and "(EXPIRED)" in report.rebuilt[0]
    assert report.steps[5].detail["results"] == run.results
    dry = reproduce(lab.platform, run.manifest_hash, rebuild=False)
    assert dry.outcome is Outcome.EXPIRED


def test_reproduce_unknown_artifact_is_not_reproducible_by_construction(lab: Lab, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = dsv(lab, monkeypatch, capsys, "reproduce", "no_such_report")
    assert code == 1
    assert "1. FAIL locate the manifest: not reproducible by construction" in out
    assert out.count(" skip ") == 5 and "verdict: NOT_FOUND" in out


def test_reproduce_model_run_retrains_in_the_restored_venv(lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]) -> None:
    """A model run pinned to a clean commit with a lock: training reruns in a worktree of it and the venv from its lock."""
    build = lab.fresh()
    run = train_model(lab.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=42,
                      code={"repo": str(code_repo.path), "commit": code_repo.commit, "dirty": False})  # fmt: skip
    assert run.run_manifest["environment"]["lockfile_sha256"] == hashlib.sha256(code_repo.lock()).hexdigest()
    report = reproduce(lab.platform, run.run_hash)
    assert report.outcome is Outcome.REPRODUCED, report.reason
    assert report.output is not None and report.output.exact
    rerun = next(c for c in report.checks if c.step == "training_rerun")
    restored = rerun.detail["environment"]
    assert restored["commit"] == code_repo.commit and not restored["venv"].startswith(sys.prefix), restored


def test_reproduce_artifact_whose_commit_has_no_lock_is_not_reproducible_by_construction(lab: Lab, code_repo: CodeRepo) -> None:
    git(code_repo.path, "rm", "--quiet", "requirements.lock")
    git(code_repo.path, "commit", "--quiet", "-m", "no lock")
    commit = git(code_repo.path, "rev-parse", "HEAD")
    code_repo.checkout(code_repo.commit)
    run = produce(lab, {"repo": str(code_repo.path), "commit": commit, "dirty": False})
    assert run.manifest["environment"]["lockfile_sha256"] == "unknown"
    report = reproduce(lab.platform, run.manifest_hash)
    assert report.outcome is Outcome.NOT_REPRODUCIBLE_NO_LOCK
    assert statuses(report)[:2] == [(1, "passed"), (2, "failed")] and "has no requirements.lock" in report.steps[1].summary


def test_reproduce_artifact_checks_the_tz_rules_the_restored_lock_loads(lab: Lab, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]) -> None:
    """Produced today (tzdata of this venv) at a commit whose lock pins tzdata 2024.1: step 4 names the rules that differ."""
    run = produce_with_pin(lab, code_repo, "tzdata", "2024.1")
    report = reproduce(lab.platform, run.manifest_hash)
    assert report.outcome is Outcome.ENVIRONMENT_DRIFT, report.reason
    step4 = report.steps[3]
    assert (step4.status.value, step4.detail["loaded"]["version"]) == ("failed", "2024a")
    assert f"tzdata version: recorded {run.manifest['environment']['tz_database']['version']!r}, now '2024a'" in step4.summary
