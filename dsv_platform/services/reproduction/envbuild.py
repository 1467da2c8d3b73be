"""Restoring what produced an artifact: its commit in a temporary git worktree, its environment from the recorded lock, a run in both.

The venv is built from exactly the lock (``uv pip sync --require-hashes``; stdlib venv and pip when uv is
missing) into a cache keyed by the lock's SHA-256, under a file lock, complete once its marker is written.

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsv_platform.core.errors import DsvError, FailureKind

LOCKFILE = "requirements.lock"
MARKER = ".dsv-complete"
_COMMIT = re.compile(r"^[0-9a-f]{7,64}\Z")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


class NotReproducibleError(DsvError):
    """Not reproducible by construction: a dirty pin, a commit that is not here, no recorded lock (FAILED)."""

    kind = FailureKind.FAILED


class EnvironmentBuildError(DsvError):
    """The recorded lock could not be installed into a venv (the installer's last lines say why)."""


class RunnerError(DsvError):
    """The recorded code failed inside the restored environment (FAILED: the artifact did not reproduce)."""

    kind = FailureKind.FAILED


def _git(repo: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=timeout)


def commit_exists(repo: Path, commit: str) -> bool:
    return bool(_COMMIT.match(commit)) and _git(repo, "cat-file", "-e", f"{commit}^{{commit}}", timeout=30).returncode == 0


def lock_at(repo: Path, commit: str) -> bytes:
    """``requirements.lock`` as committed at ``commit`` (NotReproducibleError when that commit has none)."""
    done = _git(repo, "show", f"{commit}:{LOCKFILE}")
    if done.returncode != 0:
        raise NotReproducibleError(f"not reproducible by construction: commit {commit} in {repo} has no {LOCKFILE}")
    return done.stdout


@contextlib.contextmanager
def restored_code(repo: Path, commit: str, dirty: bool) -> Iterator[Path]:
    """A temporary ``git worktree add --detach`` of ``commit`` in ``repo``, removed (and pruned) afterwards."""
    if dirty:
        raise NotReproducibleError(f"not reproducible by construction: the artifact was produced from a dirty checkout (commit {commit})")
    if not commit_exists(repo, commit):
        raise NotReproducibleError(f"not reproducible by construction: commit {commit} does not exist in {repo}")
    parent = Path(tempfile.mkdtemp(prefix="dsv-worktree-"))
    tree = parent / "src"
    added = _git(repo, "worktree", "add", "--detach", str(tree), commit)
    if added.returncode != 0:
        shutil.rmtree(parent, ignore_errors=True)
        raise NotReproducibleError(f"git worktree add of {commit} in {repo} failed: {added.stderr.decode(errors='replace').strip()}")
    try:
        yield tree
    finally:
        _git(repo, "worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
        _git(repo, "worktree", "prune")


def lock_pins(lock: bytes) -> dict[str, str]:
    """``{normalized name: version}`` of every ``name==version`` line of a hashed requirements lock."""
    pins = {}
    for line in lock.decode().splitlines():
        m = _PIN.match(line.strip())
        if m:
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def default_cache() -> Path:
    return Path.home() / ".cache" / "dsv" / "envs"


def _interpreter(python: str) -> str:
    """This interpreter when it is the recorded version (uv finds or fetches another ``python`` otherwise)."""
    if python == platform.python_version():
        return getattr(sys, "_base_executable", sys.executable) or sys.executable
    return python


def _uv() -> str | None:
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


def _install(target: Path, lockfile: Path, python: str) -> None:
    uv = _uv()
    if uv is not None:
        commands = [
            [uv, "venv", "--quiet", "--python", _interpreter(python), str(target)],
            [uv, "pip", "sync", "--quiet", "--require-hashes", "--python", str(target / "bin" / "python"), str(lockfile)],
        ]
    else:
        if python != platform.python_version():
            raise EnvironmentBuildError(f"the lock was recorded on python {python}, this is {platform.python_version()}, and uv is not installed to fetch it")
        commands = [
            [_interpreter(python), "-m", "venv", str(target)],
            [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps", "-r", str(lockfile)],
        ]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise EnvironmentBuildError(f"building the environment from {lockfile} failed ({Path(command[0]).name} {command[1]}): {tail}")


def environment_from_lock(lock: bytes, python: str, *, cache: Path | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """The venv built from exactly ``lock`` on ``python``: ``cache/<sha256 of lock>``, built once (file-locked), reused when complete."""
    key = hashlib.sha256(lock).hexdigest()
    root = cache or default_cache()
    target = root / key
    if (target / MARKER).exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _message: None)
    with open(root / f"{key}.building", "a+b") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if (target / MARKER).exists():
            return target
        shutil.rmtree(target, ignore_errors=True)  # a build that died half way
        lockfile = root / f"{key}.lock"
        lockfile.write_bytes(lock)
        say(f"building the environment {key[:12]} from the recorded lock into {target} (cold: up to a few minutes)")
        started = time.monotonic()
        _install(target, lockfile, python)
        seconds = round(time.monotonic() - started, 1)
        (target / MARKER).write_text(json.dumps({"lock_sha256": key, "python": python, "seconds": seconds}))
        say(f"environment {key[:12]} built in {seconds} s")
    return target


def tz_file(venv: Path, zone: str) -> Path | None:
    """The TZif file of ``zone`` in the venv's tzdata package (the lock's rules), if it has one."""
    found = sorted(venv.glob(f"lib/python*/site-packages/tzdata/zoneinfo/{zone}"))
    return found[0] if found and ".." not in zone else None


def run_in(venv: Path, worktree: Path, module: str, args: Sequence[str], *, tz: str, timeout: float = 1800) -> Mapping[str, Any]:
    """Run ``python -m module args`` of the venv from ``worktree`` (nothing of today's checkout), TZ pinned; its JSON output."""
    zone = tz_file(venv, tz)
    env = {
        "PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin",
        "HOME": str(worktree.parent),  # a scratch home: no user configuration reaches the rerun
        "LANG": "C.UTF-8",
        "VIRTUAL_ENV": str(venv),
        "PYTHONPATH": str(worktree),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONTZPATH": "",  # zoneinfo reads the lock's tzdata package, never the host's /usr/share/zoneinfo
        "TZ": f":{zone}" if zone is not None else tz,  # libc too: the lock's TZif file for the recorded zone
    }
    done = subprocess.run([str(venv / "bin" / "python"), "-m", module, *args], cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise RunnerError(f"{module} at {worktree.name} in {venv.name[:12]} exited {done.returncode}: {tail}")
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise RunnerError(f"{module} printed no JSON result: {done.stdout[-300:]!r}") from exc
    if not isinstance(result, dict):
        raise RunnerError(f"{module} printed {type(result).__name__}, not a JSON object")
    return result
