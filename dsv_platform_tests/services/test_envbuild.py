"""Restoring code and environment: a worktree of a clean commit only, a venv built once per lock, a run pinned to it."""

from __future__ import annotations

import platform as host
import re
import subprocess
import threading
from pathlib import Path

import pytest

from dsv_platform.services.reproduction.envbuild import (
    MARKER,
    EnvironmentBuildError,
    NotReproducibleError,
    environment_from_lock,
    lock_at,
    lock_pins,
    restored_code,
    run_in,
)
from dsv_platform_tests.fixtures.code_repo import CodeRepo, git

PYTHON = host.python_version()
LOCK = (Path(__file__).resolve().parents[2] / "requirements.lock").read_text()


def small_lock(*names: str) -> bytes:
    """The blocks of ``names`` from requirements.lock (each has no dependencies of its own): a lock that builds in a second."""
    blocks = re.split(r"\n(?=[A-Za-z0-9])", LOCK.split("\n", 2)[2].strip())
    return ("\n".join(b for b in blocks if b.split("==")[0] in names) + "\n").encode()


@pytest.fixture()
def repo(tmp_path: Path) -> CodeRepo:
    path = tmp_path / "repo"
    (path / "pkg").mkdir(parents=True)
    (path / "pkg" / "__init__.py").write_text("")
    (path / "pkg" / "probe.py").write_text(
        "import json, os, sys, time, zoneinfo, datetime as dt\n"
        "z = zoneinfo.ZoneInfo('Europe/Berlin')\n"
        "print(json.dumps({'argv': sys.argv[1:], 'tz': os.environ['TZ'], 'tzname': time.tzname[0], 'path': sys.path, 'prefix': sys.prefix,\n"
        "                  'berlin': dt.datetime(2026, 7, 1, tzinfo=z).utcoffset().seconds, 'local_hour': dt.datetime.fromtimestamp(0).hour}))\n"
    )
    git(path, "init", "--quiet", "--initial-branch", "main")
    git(path, "add", "--all")
    git(path, "commit", "--quiet", "-m", "probe")
    return CodeRepo(path, git(path, "rev-parse", "HEAD"))


def test_restored_code_is_a_temporary_worktree_of_the_commit(repo: CodeRepo) -> None:
    later = repo.commit_change("pkg/later.py", b"x = 1\n", "later")
    with restored_code(repo.path, repo.commit, False) as tree:
        assert (tree / "pkg" / "probe.py").exists() and not (tree / "pkg" / "later.py").exists()
        assert git(tree, "rev-parse", "HEAD") == repo.commit
    assert not tree.exists()
    assert len(git(repo.path, "worktree", "list").splitlines()) == 1, "removed and pruned"
    assert later != repo.commit


def test_restored_code_refuses_a_dirty_pin_and_an_unknown_commit(repo: CodeRepo) -> None:
    with pytest.raises(NotReproducibleError, match="not reproducible by construction: the artifact was produced from a dirty checkout"), restored_code(
        repo.path, repo.commit, True
    ):
        pass
    with pytest.raises(NotReproducibleError, match="does not exist"), restored_code(repo.path, "ab" * 20, False):
        pass
    with pytest.raises(NotReproducibleError, match=r"has no requirements\.lock"):
        lock_at(repo.path, repo.commit)


def test_environment_from_lock_builds_once_and_reuses(tmp_path: Path) -> None:
    lock = small_lock("tzdata", "six")
    said: list[str] = []
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(environment_from_lock(lock, PYTHON, cache=tmp_path, progress=said.append))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1 and (results[0] / MARKER).exists()
    assert sum("building" in m for m in said) == 1, "two concurrent callers share one build"
    venv = results[0]
    frozen = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('tzdata'), m.version('six'))"],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert frozen == [lock_pins(lock)["tzdata"], lock_pins(lock)["six"]]
    (venv / MARKER).unlink()  # a build that died before its marker is redone
    again = environment_from_lock(lock, PYTHON, cache=tmp_path, progress=said.append)
    assert again == venv and (venv / MARKER).exists() and sum("building" in m for m in said) == 2


def test_run_in_uses_only_the_worktree_and_the_locks_tz_rules(repo: CodeRepo, tmp_path: Path) -> None:
    venv = environment_from_lock(small_lock("tzdata"), PYTHON, cache=tmp_path / "envs")
    with restored_code(repo.path, repo.commit, False) as tree:
        out = run_in(venv, tree, "pkg.probe", ["a", "b"], tz="Europe/Berlin")
    assert out["argv"] == ["a", "b"] and out["prefix"] == str(venv)
    assert str(tree) in out["path"] and not any(p.startswith(str(Path(__file__).resolve().parents[2])) for p in out["path"])
    assert out["tz"].startswith(":") and out["tz"].endswith("tzdata/zoneinfo/Europe/Berlin") and str(venv) in out["tz"]
    assert (out["tzname"], out["berlin"], out["local_hour"]) == ("CET", 7200, 1)


def test_environment_from_lock_with_a_wrong_hash_fails_typed_and_leaves_no_venv(tmp_path: Path) -> None:
    lock = re.sub(rb"sha256:[0-9a-f]{64}", b"sha256:" + b"0" * 64, small_lock("six"))
    with pytest.raises(EnvironmentBuildError, match=r"building the environment from .*\.lock failed"):
        environment_from_lock(lock, PYTHON, cache=tmp_path)
    assert not list(tmp_path.glob(f"*/{MARKER}")), "a failed build is never marked complete"
