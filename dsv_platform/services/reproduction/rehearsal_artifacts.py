"""The daily (dry) rehearsal of one retained artifact: is it still resolvable today?

Steps 1 to 3 of the seven (services/reproduction/reproduce_artifact.py), cheap: the manifest located, the code pin
clean and its commit present (the environment is not rebuilt), every input resolved by its pinned
realization and re-hashed. Nothing is rebuilt and nothing rerun: that is the weekly full rehearsal's
work. One reproduction record with procedure ``rehearsal``.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dsv_platform.core.config import asset_keys
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.core.reproduction.reproduction import PRECEDENCE, Outcome
from dsv_platform.core.reproduction.reproduction_steps import Step, failed, passed
from dsv_platform.services.reproduction.artifacts import ArtifactRecord, locate_artifact
from dsv_platform.services.reproduction.envbuild import commit_exists
from dsv_platform.services.reproduction.reproduce_inputs import resolve_inputs
from dsv_platform.services.reproduction.reproduce_report import ReproductionReport, write_record

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def _code_step(record: ArtifactRecord) -> Step:
    code = record.manifest["code"]
    commit, repo = str(code["commit"]), Path(str(code["repo"]))
    if code["dirty"]:
        return failed(2, Outcome.NOT_REPRODUCIBLE_DIRTY, f"not reproducible by construction: produced from a dirty checkout (commit {commit})")
    if not commit_exists(repo, commit):
        return failed(2, Outcome.MISSING_COMMIT, f"commit {commit} does not exist in {repo}")
    return passed(2, f"commit {commit[:12]} present and clean in {repo} (the weekly full rehearsal rebuilds its environment)")


def _verdict(steps: list[Step]) -> Outcome:
    standing = {s.failure for s in steps if s.failure is not None}
    return next((o for o in PRECEDENCE if o in standing), Outcome.REPRODUCED)


def resolve_artifact(platform: Platform, target: str, *, actor: str) -> ReproductionReport:
    """Steps 1-3 of reproducing the artifact ``target`` (its manifest hash), recorded; REPRODUCED means resolvable today."""
    actor = platform.actor  # the identity that proved its key; the parameter is kept for callers, never recorded (docs/trust.md)
    record: ArtifactRecord | None = None
    try:
        record = locate_artifact(platform, target)
    except (NotFoundError, CorruptError) as exc:
        steps = [failed(1, Outcome.NOT_FOUND if isinstance(exc, NotFoundError) else Outcome.CORRUPT, f"not reproducible by construction: {exc}")]
    if record is not None:
        steps = [passed(1, f"{record.name}: manifest {record.manifest_hash}"), _code_step(record)]
        with tempfile.TemporaryDirectory(prefix="dsv-rehearsal-") as workdir:
            steps.append(resolve_inputs(platform, record.manifest, Path(workdir), actor=actor).step)
    report = ReproductionReport(
        target=target, kind="artifact", ref=f"artifact {target}" if record is None else f"artifact {record.name}",
        manifest_hash=target if record is None else record.manifest_hash, run_hash=None, outcome=_verdict(steps), checks=(), rebuilt=(),
        environment=None, output=None, procedure="rehearsal", actor=actor, at=dt.datetime.now(dt.UTC).isoformat(),
        asset_key=None if record is None else asset_keys.user_string_of(asset_keys.artifact, record.name), record_id=0, steps=tuple(steps),
    )  # fmt: skip
    return write_record(platform.registry, report)
