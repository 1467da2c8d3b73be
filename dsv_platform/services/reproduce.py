"""``reproduce``: the audit procedure for one realization or one model run (ARCHITECTURE.md, "Rehearsal and reproduction").

Locate the manifest, check code and environment, re-hash (or rebuild from raw) every input,
rerun training for a model, and write a reproduction record.
Data problems become a typed :class:`Outcome` and a record; code errors propagate.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.adapters.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ConfigurationError, CorruptError, FailureKind, ObjectNotFoundError, ObjectVerificationError, ResolutionError
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.model_run import RUN_FORMAT, Trainer, TrainingData, model_of, resolve_trainer, trainer_of
from dsv_platform.core.records import Realization
from dsv_platform.core.refs import parse_ref
from dsv_platform.core.reproduction import (
    Check,
    EnvironmentDiff,
    Outcome,
    OutputComparison,
    Tolerance,
    compare_outputs,
    decide,
    diff_environments,
    outcome_of_failure,
)
from dsv_platform.core.split_checks import assignment_hash
from dsv_platform.core.states import RealizationState
from dsv_platform.services.datasets import Dataset, load_manifest, open_dataset
from dsv_platform.services.raw_rebuild import RawMissingError, RebuiltInput, TransformChangedError, rebuild_from_raw, split_of
from dsv_platform.services.realization import REPO, environment_lockfile, environment_pin

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

_HEX = re.compile(r"^[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")


@dataclass(frozen=True)
class Target:
    kind: str  # "realization" or "model"
    ref: str
    manifest_hash: str
    realization: Realization
    run: Mapping[str, Any] | None = None
    run_hash: str | None = None

    @property
    def asset_key(self) -> str:
        if self.kind == "model" and self.run is not None:
            return model_of(self.run)
        return f"{self.realization.dataset}_{self.realization.version}_snapshot"


@dataclass(frozen=True)
class ReproductionReport:
    """What the audit found; ``record_id`` is its row in the registry's reproduction records."""

    target: str
    kind: str
    ref: str
    manifest_hash: str
    run_hash: str | None
    outcome: Outcome
    checks: tuple[Check, ...]
    rebuilt: tuple[str, ...]
    environment: EnvironmentDiff | None
    output: OutputComparison | None
    procedure: str
    actor: str
    at: str
    asset_key: str | None
    record_id: int

    @property
    def reconstructable(self) -> bool:
        return self.outcome.reconstructable

    @property
    def reason(self) -> str:
        """The last failed check implying the verdict (its step and detail), or the outcome."""
        failed = [c for c in self.checks if not c.passed]
        if not failed:
            return self.outcome.value
        c = next((c for c in reversed(failed) if c.failure is self.outcome), failed[0])
        return f"{c.failure.value if c.failure else 'FAILED'}: {c.step}: {canonical_json.dumps(dict(c.detail)).decode()}"

    def details(self) -> dict[str, Any]:
        return {
            "procedure": self.procedure,
            "target": self.target,
            "kind": self.kind,
            "run_hash": self.run_hash,
            "checks": [c.to_document() for c in self.checks],
            "matched": [c.step for c in self.checks if c.passed],
            "rebuilt": list(self.rebuilt),
            "environment": None if self.environment is None else self.environment.to_document(),
            "output": None if self.output is None else self.output.to_document(),
            "tolerance_needed": None if self.output is None else ("exact" if self.output.exact else dict(self.output.needed_bp)),
        }

    def to_document(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "manifest_hash": self.manifest_hash,
            "outcome": self.outcome.value,
            "actor": self.actor,
            "at": self.at,
            "record_id": self.record_id,
            "asset_key": self.asset_key,
            **self.details(),
        }


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
    commit, dirty = str(code.get("commit", "unknown")), bool(code.get("dirty", False))
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
        return [Check("inputs", True, detail={"ref": target.ref, **verify_dataset(ds)})], [], ds
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
) -> ReproductionReport:
    """Run the audit procedure on ``target`` (a ref, a manifest hash or a run-manifest hash) and record the result.

    ``rebuild=False`` and ``smoke=True`` make the dry variant the rehearsal runs. A model run is
    retrained by the trainer its run manifest names (``trainer`` overrides it).
    """
    who = actor or platform.actor
    registry = platform.registry
    store = platform.store
    checks: list[Check] = []
    rebuilt: list[str] = []
    env: EnvironmentDiff | None = None
    output: OutputComparison | None = None
    located = locate(registry, store, target)
    if isinstance(located, Check):
        return _finish(registry, target, None, [located], [], None, None, procedure, who)
    manifest: Manifest | None = None
    try:
        manifest = load_manifest(registry, located.realization)
    except ResolutionError as exc:
        checks.append(Check("manifest", False, outcome_of_failure(exc.kind), {"reason": str(exc)}))
    if manifest is not None:
        checks.append(Check("manifest", True, detail={"manifest_hash": located.manifest_hash}))
        code = located.run["code"] if located.run else (manifest.code.to_document() if manifest.code else {"commit": "unknown", "dirty": False})
        checks.append(check_code(code, repo))
        if checks[-1].passed:
            recorded_env = located.run["environment"] if located.run else (manifest.environment.to_document() if manifest.environment else {})
            env_check, env = check_environment(store, recorded_env)
            checks.append(env_check)
            found, notes, source = check_inputs(platform, located, manifest, rebuild=rebuild, actor=who)
            checks += found
            rebuilt += notes
            if source is not None and located.run is not None:
                step, output = rerun_training(source, manifest, located.run, smoke=smoke, trainer=trainer)
                checks.append(step)
    return _finish(registry, target, located, checks, rebuilt, env, output, procedure, who)


def _finish(
    registry: Registry, target: str, located: Target | None, checks: list[Check], rebuilt: list[str],
    env: EnvironmentDiff | None, output: OutputComparison | None, procedure: str, actor: str,
) -> ReproductionReport:
    outcome = decide(checks, rebuilt=rebuilt)
    now = dt.datetime.now(dt.UTC).isoformat()
    report = ReproductionReport(
        target=target,
        kind="unknown" if located is None else located.kind,
        ref=target if located is None else located.ref,
        manifest_hash="" if located is None else located.manifest_hash,
        run_hash=None if located is None else located.run_hash,
        outcome=outcome,
        checks=tuple(checks),
        rebuilt=tuple(rebuilt),
        environment=env,
        output=output,
        procedure=procedure,
        actor=actor,
        at=now,
        asset_key=None if located is None else located.asset_key,
        record_id=0,
    )
    record_id = registry.record_reproduction(report.ref, report.manifest_hash, actor=actor, outcome=outcome.value, details={**report.details(), "at": now})
    return ReproductionReport(**{**report.__dict__, "record_id": record_id})
