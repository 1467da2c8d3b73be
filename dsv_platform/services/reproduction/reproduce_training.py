"""A model run's training rerun in its own restored environment: the trainer's commit in a worktree, the venv from its lock.

:func:`restored_trainer` gives a Trainer that exports the splits as Arrow IPC files and runs the recorded
trainer through ``reproduce_runner`` in that venv (TZ pinned to the run's runner timezone). A run that
records no lock (``lockfile_sha256`` unknown) cannot be restored: the caller says so and reruns in today's.

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.reproduction.model_run import TrainedModel, Trainer, TrainingData, trainer_of
from dsv_platform.services.reproduction.envbuild import (
    NotReproducibleError,
    commit_exists,
    default_cache,
    environment_from_lock,
    lock_at,
    restored_code,
    run_in,
)
from dsv_platform.services.reproduction.reproduce_inputs import write_ipc

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

RUNNER = "dsv_platform.services.reproduction.reproduce_runner"
UNKNOWN = "unknown"


def restorable(run: Mapping[str, Any], repo: Path) -> Path | None:
    """The repository holding the run's clean commit, when the run records a lock to rebuild; else None."""
    code, env = run.get("code") or {}, run.get("environment") or {}
    if code.get("dirty") or env.get("lockfile_sha256") in (None, UNKNOWN):
        return None
    commit = str(code.get("commit", ""))
    for candidate in (Path(str(code.get("repo") or repo)), repo):
        if candidate.is_dir() and commit_exists(candidate, commit):
            return candidate
    return None


def restored_trainer(
    platform: Platform, run: Mapping[str, Any], where: Path, stack: ExitStack, *, say: Callable[[str], None]
) -> tuple[Trainer, dict[str, Any]]:
    """The recorded trainer, run in a worktree of the run's commit and a venv from its lock (both live until ``stack`` closes)."""
    code, env = run["code"], run["environment"]
    commit = str(code["commit"])
    lock = lock_at(where, commit)
    if hashlib.sha256(lock).hexdigest() != env["lockfile_sha256"]:
        why = f"requirements.lock at {commit[:12]} is not the lock the run records ({env['lockfile_sha256']})"
        raise NotReproducibleError(f"not reproducible by construction: {why}")
    worktree = stack.enter_context(restored_code(where, commit, False))
    venv = environment_from_lock(lock, str(env.get("python", "")), cache=platform.settings.env_cache or default_cache(), progress=say)
    workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsv-retrain-")))
    seen: dict[str, Any] = {"repo": str(where), "commit": commit, "venv": str(venv), "lock_sha256": env["lockfile_sha256"]}

    def train(data: TrainingData) -> TrainedModel:
        request = {
            "trainer": trainer_of(run),
            "train": str(write_ipc(data.train, workdir / "train.arrow")),
            "validation": str(write_ipc(data.validation, workdir / "validation.arrow")),
            "seed": data.seed,
            "parameters": dict(data.parameters),
            "smoke": data.smoke,
        }
        (workdir / "request.json").write_text(json.dumps(request, sort_keys=True))
        out = run_in(venv, worktree, RUNNER, [str(workdir / "request.json")], tz=str(env.get("runner_timezone") or "UTC"))
        seen["python"] = out.get("python")
        return TrainedModel(str(out["weights_hash"]), dict(out["metrics"]), bool(out["finite"]))

    return train, seen
