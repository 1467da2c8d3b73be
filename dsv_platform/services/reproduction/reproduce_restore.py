"""Step 2 of reproducing an artifact: its commit in a temporary worktree, its environment rebuilt from the lock at that commit.

A dirty pin, a commit that is not here, or a commit whose ``requirements.lock`` is absent or not the
recorded one (``environment.lockfile_sha256``) make the artifact not reproducible by construction.
Today's environment is only compared with the lock (the record says which packages differ); it is never used.

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.core.reproduction.reproduction_steps import Step, failed, passed
from dsv_platform.services.publication.realization_inputs import environment_lockfile
from dsv_platform.services.reproduction.envbuild import (
    NotReproducibleError,
    commit_exists,
    default_cache,
    environment_from_lock,
    lock_at,
    lock_pins,
    restored_code,
    run_in,
)

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def _normalized(pins: Mapping[str, str]) -> dict[str, str]:
    return {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pins.items()}


def differences(lock: Mapping[str, str], installed: Mapping[str, str]) -> dict[str, list[str | None]]:
    """``{package: [locked version, installed version or None]}`` for every locked package installed otherwise (or not at all)."""
    have = _normalized(installed)
    return {name: [version, have.get(name)] for name, version in sorted(lock.items()) if have.get(name) != version}


def today_installed() -> dict[str, str]:
    lines = environment_lockfile().decode().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line)


@dataclass(frozen=True)
class Restored:
    """The recorded commit checked out in ``worktree`` and the venv built from its lock."""

    repo: Path
    commit: str
    worktree: Path
    venv: Path
    lock: bytes

    def run(self, module: str, args: Sequence[str], *, tz: str) -> Mapping[str, Any]:
        return run_in(self.venv, self.worktree, module, args, tz=tz)

    def describe(self, packages: Mapping[str, str]) -> dict[str, Any]:
        """The restored environment: the lock, how the venv's packages and today's differ from it."""
        pins = lock_pins(self.lock)
        return {
            "repo": str(self.repo),
            "commit": self.commit,
            "venv": str(self.venv),
            "lock_sha256": hashlib.sha256(self.lock).hexdigest(),
            "locked_packages": len(pins),
            "venv_differs_from_lock": differences(pins, packages),
            "today_differs_from_lock": differences(pins, today_installed()),
        }


def _repo_of(code: Mapping[str, Any], fallback: Path) -> Path:
    recorded = Path(str(code.get("repo") or fallback))
    commit = str(code.get("commit", ""))
    return recorded if recorded.is_dir() and commit_exists(recorded, commit) else fallback


def restore(platform: Platform, manifest: Mapping[str, Any], stack: ExitStack, *, repo: Path, say: Callable[[str], None]) -> tuple[Step, Restored | None]:
    """Step 2; the worktree is removed when ``stack`` closes."""
    code, env = manifest["code"], manifest["environment"]
    commit, dirty = str(code["commit"]), bool(code["dirty"])
    where = _repo_of(code, repo)
    detail: dict[str, Any] = {"repo": str(where), "commit": commit, "dirty": dirty, "lockfile_sha256": env["lockfile_sha256"]}
    try:
        worktree = stack.enter_context(restored_code(where, commit, dirty))
    except NotReproducibleError as exc:
        outcome = Outcome.NOT_REPRODUCIBLE_DIRTY if dirty else Outcome.MISSING_COMMIT
        return failed(2, outcome, str(exc), **detail), None
    try:
        lock = lock_at(where, commit)
    except NotReproducibleError as exc:
        return failed(2, Outcome.NOT_REPRODUCIBLE_NO_LOCK, str(exc), **detail), None
    got = hashlib.sha256(lock).hexdigest()
    if got != env["lockfile_sha256"]:
        why = f"not reproducible by construction: requirements.lock at {commit[:12]} hashes to {got}, the manifest records {env['lockfile_sha256']}"
        return failed(2, Outcome.NOT_REPRODUCIBLE_NO_LOCK, why, **detail), None
    cache = platform.settings.env_cache or default_cache()
    venv = environment_from_lock(lock, str(env["python"]), cache=cache, progress=say)
    restored = Restored(where, commit, worktree, venv, lock)
    today = differences(lock_pins(lock), today_installed())
    drift = f"; today's environment differs from the lock in {len(today)} package(s), unused" if today else "; today's environment matches the lock"
    summary = f"commit {commit[:12]} in a temporary worktree, venv {venv.name[:12]} from its lock (python {env['python']}){drift}"
    return passed(2, summary, **detail, venv=str(venv), worktree=str(worktree), today_differs_from_lock=today), restored
