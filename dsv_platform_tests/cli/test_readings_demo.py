"""`dsv demo` on the readings configuration, end to end in a subprocess: the report's number is reproduced six months
later through a rebuild from raw, the seven steps printed; run again on the same home from a dirty checkout, the
previous world is moved aside and step 2 refuses honestly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv_platform.examples.readings import CONFIG_DIR
from dsv_platform_tests.fixtures.code_repo import CodeRepo, snapshot_repo

pytestmark = pytest.mark.xdist_group("readings_demo")
STEP = re.compile(r"^  (?P<n>[1-7])\. (?P<mark>ok  |FAIL|skip) (?P<title>[^:]+): (?P<summary>.*)$", re.M)


def _run_demo(home: Path, repo: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_") and k != "DAGSTER_HOME"}
    env |= {"DSV_HOME": str(home), "DSV_CONFIG_DIR": str(CONFIG_DIR)}
    if os.environ.get("DSV_ENV_CACHE"):
        env["DSV_ENV_CACHE"] = os.environ["DSV_ENV_CACHE"]
    dsv = Path(sys.executable).with_name("dsv")
    result = subprocess.run([str(dsv), "demo", "--repo", str(repo)], env=env, capture_output=True, text=True, timeout=900)
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory, code_repo: CodeRepo, restored_env: Callable[[bytes], Path]) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("readings_demo") / "home"
    code, out = _run_demo(home, code_repo.path)
    assert code == 0, out[-4000:]
    return home, out


def test_readings_demo_reproduces_the_number_after_late_data_a_correction_and_an_expiry(clean_run: tuple[Path, str]) -> None:
    home, out = clean_run
    assert "(fresh)" in out.splitlines()[0] and "uncommitted" not in out
    assert f"in the UI, in the checkout: DSV_HOME={home.resolve()} DSV_CONFIG_DIR={CONFIG_DIR.resolve()} make ui\n" in out  # its own home
    produced = re.search(r"produced 2026-04-03T09:00:00\+00:00 \(simulated clock\)\n  (?P<numbers>.+)\n  footer: manifest sha256:(?P<hash>[0-9a-f]{64})", out)
    assert produced, out[-4000:]
    assert "total_kwh_by_region" in produced["numbers"] and "p99_hourly_load_kwh" in produced["numbers"]
    old, new = re.findall(r"^  (?:old|new) (readings_hourly:v1@sha256:[0-9a-f]{64})  content ([0-9a-f]{64})$", out, re.M)
    assert old[0] != new[0] and old[1] != new[1], "the late readings and the correction change a new realization"
    assert f"the report's input now answers EXPIRED: {old[0]}" in out
    assert f"$ dsv reproduce {produced['hash']}" in out
    steps = [(int(m["n"]), m["mark"].strip(), m["summary"]) for m in STEP.finditer(out)]
    assert [n for n, _, _ in steps] == [1, 2, 3, 4, 5, 6, 7], out[-4000:]
    marks = {n: mark for n, mark, _ in steps}
    assert (marks[1], marks[2], marks[4], marks[6], marks[7]) == ("ok", "ok", "ok", "ok", "ok"), steps
    assert marks[3] == "FAIL" and "EXPIRED" in steps[2][2], "the pinned input is gone: step 3 names it, step 6 rebuilds it"
    assert re.search(r"^     rebuilt: readings_hourly:v1@sha256:[0-9a-f]{64} rebuilt from \d+ raw batches", out, re.M)
    assert "verdict: REPRODUCED_AFTER_REBUILD" in out
    assert f"produced on 2026-04-03: {produced['numbers']}\nrerun six months later: {produced['numbers']}\n  the same number: reproduced" in out


def test_readings_demo_again_on_the_same_home_from_a_dirty_checkout_refuses_honestly(clean_run: tuple[Path, str], tmp_path: Path) -> None:
    home, _ = clean_run
    dirty = snapshot_repo(tmp_path / "repo")
    (dirty.path / "uncommitted.txt").write_text("a change nobody committed\n")
    code, out = _run_demo(home, dirty.path)
    assert code == 0, out[-4000:]
    [moved] = [p for p in home.parent.iterdir() if p.name.startswith("home.old-")]
    assert f"the previous run moved aside to {moved}" in out.splitlines()[0] and (moved / "registry.db").exists()
    assert "has uncommitted changes; the report will be pinned dirty and step 2 will refuse it" in out
    steps = {int(m["n"]): m["mark"].strip() for m in STEP.finditer(out)}
    assert steps == {1: "ok", 2: "FAIL", 3: "skip", 4: "skip", 5: "skip", 6: "skip", 7: "ok"}, out[-4000:]
    assert "verdict: NOT_REPRODUCIBLE_DIRTY" in out and "a fresh clone is clean" in out
