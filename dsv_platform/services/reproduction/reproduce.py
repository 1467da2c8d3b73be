"""``reproduce``: the audit procedure for one realization or one model run (docs/architecture.md, "Rehearsal and reproduction").

Locate the manifest, check code and environment, re-hash (or rebuild from raw) every input,
rerun training for a model, and write a reproduction record.
Data problems become a typed :class:`Outcome` and a record; code errors propagate.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import (
    ConfigurationError,
    CorruptError,
    FailureKind,
    NotFoundError,
    ObjectNotFoundError,
    ObjectVerificationError,
    ResolutionError,
)
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.reproduction.model_run import RUN_FORMAT, Trainer, TrainingData, resolve_trainer, trainer_of
from dsv_platform.core.reproduction.reproduction import (
    Check,
    EnvironmentDiff,
    Outcome,
    OutputComparison,
    Tolerance,
    compare_outputs,
    diff_environments,
    outcome_of_failure,
)
from dsv_platform.core.splits.split_checks import assignment_hash
from dsv_platform.services.publication.datasets import Dataset, load_manifest, open_dataset
from dsv_platform.services.publication.realization import REPO, environment_lockfile, environment_pin
from dsv_platform.services.publication.split_verify import verify_splits
from dsv_platform.services.reproduction.artifacts import locate_artifact
from dsv_platform.services.reproduction.envbuild import NotReproducibleError
from dsv_platform.services.reproduction.raw_rebuild import RawMissingError, RebuiltInput, TransformChangedError, rebuild_from_raw, split_of
from dsv_platform.services.reproduction.reproduce_artifact import reproduce_artifact
from dsv_platform.services.reproduction.reproduce_report import ReproductionReport, Target, finish
from dsv_platform.services.reproduction.reproduce_training import restorable, restored_trainer
from dsv_platform.services.trust.signing import check_signature

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

_HEX = re.compile(r"^[0-9a-f]{64}\Z")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}\Z")


# ---------------------------------------------------------------- 1. locate


def _run_manifest(store: ObjectStore, digest: str) -> Mapping[str, Any] | Check | None:
    try:
        data = store.get(digest)
    except ObjectNotFoundError:
        return None
    except ObjectVerificationError:
        return Check("locate", False, Outcome.CORRUPT, {"object": digest, "reason": "run manifest object does not hash to its name"})
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format") != RUN_FORMAT:
        return None
    if canonical_json.sha256_hex(doc) != digest:
        return Check("locate", False, Outcome.CORRUPT, {"object": digest, "reason": "run manifest is not canonical for its hash"})
    return doc


def locate(registry: Registry, store: ObjectStore, target: str) -> Target | Check:
    """The realization (and, for a model, the run manifest) ``target`` names, or a failed ``locate`` check."""
    text = target.strip()
    digest = text.removeprefix("sha256:").lower()
    if _HEX.match(digest):
        found = registry.find_by_manifest_hash(digest)
        if found is not None:
            return Target("realization", found.ref, digest, found)
        run = _run_manifest(store, digest)
        if isinstance(run, Check):
            return run
        if run is not None:
            mh = str(run["realization"]["manifest_hash"])
            found = registry.find_by_manifest_hash(mh)
            if found is None:
                return Check("locate", False, Outcome.NOT_FOUND, {"run_hash": digest, "reason": f"the run's realization {mh} is not in the registry"})
            return Target("model", found.ref, mh, found, run, digest)
        return Check("locate", False, Outcome.NOT_FOUND, {"target": text, "reason": "no realization manifest and no model run manifest by this hash"})
    parsed = parse_ref(text)
    try:
        found = registry.resolve_ref(parsed)
    except ResolutionError as exc:
        if parsed.manifest_hash is None or exc.kind is FailureKind.NOT_FOUND:
            return Check("locate", False, outcome_of_failure(exc.kind), {"target": text, "reason": str(exc)})
        found = registry.find_by_manifest_hash(parsed.manifest_hash)
        if found is None:
            return Check("locate", False, Outcome.NOT_FOUND, {"target": text, "reason": str(exc)})
    assert found.manifest_hash is not None
    return Target("realization", found.ref, found.manifest_hash, found)


def is_artifact_target(platform: Platform, target: str) -> bool:
    """An artifact's name or footer hash (prefix), rather than a dataset reference, a realization or a model run."""
    text = target.strip().lower().removeprefix("manifest").strip().removeprefix("sha256:")
    if not _HEX.match(text):
        return ":" not in text
    if platform.registry.find_by_manifest_hash(text) is not None or _run_manifest(platform.store, text) is not None:
        return False
    try:
        locate_artifact(platform, text)
    except (NotFoundError, CorruptError):
        return False
    return True


# ---------------------------------------------------------------- 2. code, 3. environment


def commit_exists(commit: str, repo: Path = REPO) -> bool:
    """``git cat-file -e <commit>^{commit}`` in ``repo``."""
    if not _COMMIT.match(commit):
        return False
    try:
        done = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def check_code(code: Mapping[str, Any], repo: Path = REPO) -> Check:
    """The pin must be clean and its commit present: in the recorded repository if it is here, else in ``repo``."""
    commit, dirty = str(code.get("commit", "unknown")), bool(code.get("dirty", False))
    recorded = Path(str(code.get("repo") or repo))
    repo = recorded if recorded.is_dir() and commit_exists(commit, recorded) else repo
    if dirty:
        reason = "built from uncommitted changes: not reproducible by construction"
        return Check("code", False, Outcome.NOT_REPRODUCIBLE_DIRTY, {"commit": commit, "dirty": True, "reason": reason})
    if not commit_exists(commit, repo):
        return Check("code", False, Outcome.MISSING_COMMIT, {"commit": commit, "reason": f"commit {commit} does not exist in {repo}"})
    return Check("code", True, detail={"commit": commit, "dirty": False})


def check_environment(store: ObjectStore, recorded: Mapping[str, Any]) -> tuple[Check, EnvironmentDiff]:
    current = environment_pin()
    lockfile = environment_lockfile()
    store.put(lockfile)  # so a later audit can diff against today's list
    recorded_hash, recorded_python = str(recorded.get("lockfile_hash", "")), str(recorded.get("python", ""))
    text: str | None
    try:
        text = store.get(recorded_hash).decode() if _HEX.match(recorded_hash) else None
    except (ObjectNotFoundError, ObjectVerificationError):
        text = None
    diff = diff_environments(recorded_hash, recorded_python, current.lockfile_hash, current.python, text, lockfile.decode())
    if diff.drifted:
        return Check("environment", False, Outcome.ENVIRONMENT_DRIFT, {"differs": diff.summary()}), diff
    return Check("environment", True, detail={"lockfile_hash": recorded_hash}), diff


# ---------------------------------------------------------------- 4. inputs


def verify_dataset(ds: Dataset) -> dict[str, Any]:
    content = ds.verify_content()
    splits, assignment = ds.manifest.splits, ds.split_assignment
    if splits is not None and assignment is not None:
        got = assignment_hash(assignment, assignment.column_names[0])  # the example id comes first
        if got != splits.assignment_hash:
            raise CorruptError(
                f"split assignment {splits.assignment_object} hashes to {got}, the manifest says {splits.assignment_hash}",
                ref=ds.ref,
                detail={"object": splits.assignment_object},
            )
    return {"content_hash": content, "partitions": len(ds.partitions), "assignment_hash": None if splits is None else splits.assignment_hash}


def check_inputs(
    platform: Platform, target: Target, manifest: Manifest, *, rebuild: bool, actor: str
) -> tuple[list[Check], list[str], Dataset | RebuiltInput | None]:
    """Re-hash the realization; rebuild it from raw when it is EXPIRED or CORRUPT and ``rebuild`` is set."""
    why: ResolutionError | None = None
    if target.realization.state is RealizationState.REDACTED:
        return [Check("inputs", False, Outcome.REDACTED, {"ref": target.ref, "reason": "redacted by a privacy deletion; never rebuilt"})], [], None
    try:
        ds = open_dataset(platform, target.ref, actor=actor)
        verified = verify_dataset(ds)
        splits = verify_splits(platform, ds)  # the stored assignment recomputed from its policy (CORRUPT when it differs)
        detail = {"ref": target.ref, **verified, "splits_recomputed": splits is not None}
        return [Check("inputs", True, detail=detail)], [], ds
    except ResolutionError as exc:
        if exc.kind not in (FailureKind.EXPIRED, FailureKind.CORRUPT):
            return [Check("inputs", False, outcome_of_failure(exc.kind), {"ref": target.ref, "reason": str(exc), **dict(exc.detail or {})})], [], None
        why = exc
    failed = Check("inputs", False, outcome_of_failure(why.kind), {"ref": target.ref, "reason": str(why), **dict(why.detail or {})})
    if not rebuild:
        return [failed], [], None
    with tempfile.TemporaryDirectory(prefix="dsv-rebuild-") as workdir:
        try:
            rebuilt = rebuild_from_raw(platform, manifest, workdir=Path(workdir))
        except (RawMissingError, TransformChangedError) as exc:
            return [failed, Check("rebuild", False, outcome_of_failure(why.kind), {"reason": str(exc)})], [], None
    expected = (manifest.content_hash, None if manifest.splits is None else manifest.splits.assignment_hash)
    got = (rebuilt.content_hash, rebuilt.assignment_hash if manifest.splits is not None else None)
    detail = {
        "content_hash": got[0],
        "assignment_hash": got[1],
        "expected_content_hash": expected[0],
        "expected_assignment_hash": expected[1],
        "raw_batches": rebuilt.batches,
        "watermark": manifest.watermark,
    }
    if got != expected:
        return [failed, Check("rebuild", False, Outcome.HASH_MISMATCH, detail)], [], None
    note = f"{target.ref} rebuilt from {rebuilt.batches} raw batches up to {manifest.watermark} ({why.kind.name})"
    return [Check("inputs", True, detail={"ref": target.ref, "was": why.kind.name, "reason": str(why)}), Check("rebuild", True, detail=detail)], [note], rebuilt


# ---------------------------------------------------------------- 5. the training step


def _split(source: Dataset | RebuiltInput, split: str, key: tuple[str, ...]) -> pa.Table:
    return source.to_arrow(split=split) if isinstance(source, Dataset) else split_of(source, split, key)


def rerun_training(
    source: Dataset | RebuiltInput, manifest: Manifest, run: Mapping[str, Any], *, smoke: bool, trainer: Trainer | None = None
) -> tuple[Check, OutputComparison | None]:
    """Rerun the recorded trainer with the recorded parameters and seed (``smoke``: a few steps, only checking it trains)."""
    name = "training_smoke_test" if smoke else "training_rerun"
    try:
        train = trainer or resolve_trainer(trainer_of(run))
    except ConfigurationError as exc:
        return Check(name, False, Outcome.NOT_FOUND, {"trainer": trainer_of(run), "reason": str(exc)}), None
    key = tuple(manifest.contract["key"]) if manifest.contract else ()
    parameters = {k: int(v) for k, v in dict(run["parameters"]).items()}
    data = TrainingData(_split(source, "train", key), _split(source, "validation", key), int(run["seed"]), parameters, smoke)
    model = train(data)
    if smoke:
        return Check(name, model.finite, None if model.finite else Outcome.HASH_MISMATCH, {"finite_weights": model.finite}), None
    tolerance = Tolerance.from_document(run.get("tolerance"))
    cmp = compare_outputs(str(run["weights_hash"]), dict(run["metrics"]), model.weights_hash, dict(model.metrics), tolerance)
    detail = {"weights_hash": model.weights_hash, "tolerance": tolerance.to_document(), **cmp.to_document()}
    return Check(name, cmp.matched, None if cmp.matched else Outcome.HASH_MISMATCH, detail), cmp


# ---------------------------------------------------------------- the procedure


def reproduce(
    platform: Platform,
    target: str,
    *,
    actor: str | None = None,
    rebuild: bool = True,
    smoke: bool = False,
    procedure: str = "reproduce",
    repo: Path = REPO,
    trainer: Trainer | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReproductionReport:
    """Run the audit procedure on ``target`` (a ref, a manifest hash, a run-manifest hash, or an artifact) and record the result.

    ``rebuild=False`` and ``smoke=True`` make the dry variant the rehearsal runs. A model run is
    retrained by the trainer its run manifest names (``trainer`` overrides it). An artifact (its footer
    hash, a unique prefix of it, or its name) goes through the seven steps of services/reproduction/reproduce_artifact.py.
    """
    who = platform.actor  # the proven identity; ``actor`` is kept for callers, never recorded
    registry = platform.registry
    store = platform.store
    if is_artifact_target(platform, target):
        return reproduce_artifact(platform, target, actor=who, rebuild=rebuild, procedure=procedure, repo=repo, progress=progress)
    checks: list[Check] = []
    rebuilt: list[str] = []
    env: EnvironmentDiff | None = None
    output: OutputComparison | None = None
    located = locate(registry, store, target)
    if isinstance(located, Check):
        return finish(registry, target, None, [located], [], None, None, procedure, who)
    manifest = trusted_manifest(platform, located, checks)
    if manifest is not None:
        code = located.run["code"] if located.run else (manifest.code.to_document() if manifest.code else {"commit": "unknown", "dirty": False})
        checks.append(check_code(code, repo))
        if checks[-1].passed:
            recorded_env = located.run["environment"] if located.run else (manifest.environment.to_document() if manifest.environment else {})
            env_check, env = check_environment(store, recorded_env)
            with ExitStack() as stack:
                if located.run is not None and trainer is None and not smoke:
                    env_check, trainer = in_restored_environment(platform, located.run, env_check, env, repo=repo, stack=stack, say=progress)
                checks.append(env_check)
                found, notes, source = check_inputs(platform, located, manifest, rebuild=rebuild, actor=who)
                checks += found
                rebuilt += notes
                if source is not None and located.run is not None and env_check.failure is not Outcome.NOT_REPRODUCIBLE_NO_LOCK:
                    step, output = rerun_training(source, manifest, located.run, smoke=smoke, trainer=trainer)
                    checks.append(Check(step.step, step.passed, step.failure, {**step.detail, "environment": env_check.detail.get("rerun_in")}))
    return finish(registry, target, located, checks, rebuilt, env, output, procedure, who)


def trusted_manifest(platform: Platform, located: Target, checks: list[Check]) -> Manifest | None:
    """The target's manifest, once its signature is trusted (before the code pin is even looked at); else a failed check."""
    status = check_signature(platform, located.realization)
    if not status.trusted:
        checks.append(Check("signature", False, Outcome.UNTRUSTED, {"status": status.status, "signer": status.signer, "reason": status.reason}))
        return None
    try:
        manifest = load_manifest(platform.registry, located.realization)
    except ResolutionError as exc:
        checks.append(Check("manifest", False, outcome_of_failure(exc.kind), {"reason": str(exc)}))
        return None
    checks.append(Check("manifest", True, detail={"manifest_hash": located.manifest_hash, "signature": status.status}))
    return manifest


def in_restored_environment(
    platform: Platform, run: Mapping[str, Any], env_check: Check, env: EnvironmentDiff, *, repo: Path, stack: ExitStack, say: Callable[[str], None] | None
) -> tuple[Check, Trainer | None]:
    """The environment check and the trainer of a full rerun: the recorded trainer in the run's restored venv, when it records a lock.

    Then today's environment is only compared (a drift is reported, harmless); without a lock the rerun is in today's and says so.
    """
    where = restorable(run, repo)
    if where is None:
        today = "today's environment (the run records no lock)"
        return Check(env_check.step, env_check.passed, env_check.failure, {**env_check.detail, "rerun_in": today}), None
    try:
        train, seen = restored_trainer(platform, run, where, stack, say=say or (lambda _message: None))
    except NotReproducibleError as exc:
        return Check("environment", False, Outcome.NOT_REPRODUCIBLE_NO_LOCK, {"reason": str(exc)}), None
    return Check("environment", True, detail={"rerun_in": seen, "today_differs": env.summary()}), train


__all__ = ["ReproductionReport", "Target", "check_code", "check_environment", "check_inputs", "commit_exists", "locate", "reproduce", "rerun_training"]
