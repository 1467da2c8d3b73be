"""``dsv reproduce ARTIFACT_OR_FOOTER_HASH``: the seven steps, literally, each recorded with its outcome.

Locate the manifest; restore the commit into a worktree and the environment from its lock; resolve and
re-hash every input; pin TZ and the tz database; rerun the recorded producer in the restored venv and
compare at the manifest's precision; on an input mismatch rebuild it from raw and compare; write the
reproduction record and attach it to ``artifact:<hash>`` in lineage. Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.config import asset_keys
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.core.reproduction.artifact_manifest import EXACT, compare_results, describe_rule, rule_of
from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.core.reproduction.reproduction_steps import Step, failed, passed, skipped, verdict
from dsv_platform.services.lineage.lineage import record_activity
from dsv_platform.services.reproduction.artifacts import ArtifactRecord, locate_artifact
from dsv_platform.services.reproduction.envbuild import EnvironmentBuildError, RunnerError
from dsv_platform.services.reproduction.reproduce_inputs import Resolved, rebuild_inputs, resolve_inputs
from dsv_platform.services.reproduction.reproduce_report import ReproductionReport, write_record
from dsv_platform.services.reproduction.reproduce_restore import Restored, restore

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

RUNNER = "dsv_platform.services.reproduction.reproduce_runner"
Say = Callable[[str], None]


def _rerun(restored: Restored, record: ArtifactRecord, tables: Mapping[str, Path], workdir: Path) -> Mapping[str, Any]:
    m = record.manifest
    request = {
        "producer": m["produced_by"]["producer"],
        "inputs": {name: str(path) for name, path in tables.items()},
        "parameters": m["parameters"],
        "seed": m["seed"],
        "tz_database": m["environment"]["tz_database"],
    }
    path = workdir / "request.json"
    path.write_text(json.dumps(request, sort_keys=True))
    return restored.run(RUNNER, [str(path)], tz=str(m["environment"]["runner_timezone"]))


def _tz_step(record: ArtifactRecord, out: Mapping[str, Any]) -> Step:
    env = record.manifest["environment"]
    tz, recorded = str(env["runner_timezone"]), env["tz_database"]
    differences = list(out.get("differences") or [])
    detail = {"runner_timezone": tz, "recorded": recorded, "loaded": out.get("tz_database"), "libc_tzname": out.get("timezone")}
    if differences:
        return failed(4, Outcome.ENVIRONMENT_DRIFT, f"TZ={tz}; the restored tz rules differ from the recorded ones: {'; '.join(differences)}", **detail)
    return passed(4, f"TZ={tz}, tzdata {recorded.get('version')} ({len(recorded.get('zones') or {})} zone(s), rules identical)", **detail)


def _compare_step(number: int, record: ArtifactRecord, out: Mapping[str, Any], what: str) -> Step:
    m = record.manifest
    precision = dict(m["precision"])
    mismatches = compare_results(m["results"], out["results"], precision)
    detail = {"precision": precision, "results": out["results"], "mismatches": [x.to_document() for x in mismatches], "python": out.get("python")}
    if mismatches:
        named = "; ".join(f"{x.result}: recorded {x.recorded}, rerun {x.rerun} ({x.rule})" for x in mismatches[:5])
        return failed(number, Outcome.HASH_MISMATCH, f"{what}: {len(mismatches)} result(s) differ beyond the contract's precision: {named}", **detail)
    exact = [r for r in sorted(m["results"]) if rule_of(precision, r) == EXACT]
    within = [f"{r} within {describe_rule(rule_of(precision, r))}" for r in sorted(m["results"]) if r not in exact]
    how = ", ".join([f"{len(exact)} bit for bit" if exact else "", *within]).strip(", ")
    return passed(number, f"{what}: {len(m['results'])} result(s) match: {how}", **detail)


def _run_and_compare(number: int, restored: Restored, record: ArtifactRecord, tables: Mapping[str, Path], workdir: Path, what: str) -> tuple[list[Step], Any]:
    """The rerun in the restored venv: step 4 (the tz rules it loaded) and the comparison as step ``number``."""
    try:
        out = _rerun(restored, record, tables, workdir)
    except RunnerError as exc:
        why = f"the recorded producer {record.manifest['produced_by']['producer']} failed in the restored environment: {exc}"
        return [skipped(4, "the rerun failed before reporting its tz rules"), failed(number, Outcome.RERUN_FAILED, why)], None
    return [_tz_step(record, out), _compare_step(number, record, out, what)], out


def _run_steps(platform: Platform, record: ArtifactRecord, actor: str, *, rebuild: bool, repo: Path, say: Say) -> tuple[list[Step], dict[str, Any]]:
    """Steps 2 to 6 on a located artifact; also the extra details (the restored environment, what was rebuilt)."""
    extra: dict[str, Any] = {}
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dsv-reproduce-")))
        step2, restored = restore(platform, record.manifest, stack, repo=repo, say=say)
        if restored is None:
            why = "step 2 refused: not reproducible by construction; nothing is approximated"
            return [step2, *[skipped(n, why) for n in (3, 4, 5, 6)]], extra
        resolved: Resolved = resolve_inputs(platform, record.manifest, workdir, actor=actor)
        steps = [step2, resolved.step]
        out: Mapping[str, Any] | None = None
        if not resolved.broken:
            ran, out = _run_and_compare(5, restored, record, resolved.tables, workdir, "rerun in the restored venv")
            steps += [*ran, skipped(6, "no input mismatch: nothing to rebuild")]
        elif resolved.unrebuildable or not rebuild:
            why = "an input is " + ("not rebuildable" if resolved.unrebuildable else "broken and --no-rebuild was given")
            steps += [skipped(4, why), skipped(5, why), skipped(6, why)]
        else:
            steps.append(skipped(5, "inputs differ from the recorded ones: see step 6"))
            tables, notes, problem = rebuild_inputs(platform, record.manifest, resolved, workdir)
            extra["rebuilt_inputs"] = notes
            if problem is not None:
                steps += [skipped(4, "no input to run on: the rebuild failed"), problem]
            else:
                ran, out = _run_and_compare(6, restored, record, tables, workdir, f"rebuilt {len(notes)} input(s) from raw, reran")
                steps += ran
        if out is not None:
            extra["environment_restored"] = restored.describe(out.get("packages") or {})
    return sorted(steps, key=lambda s: s.number), extra


def reproduce_artifact(
    platform: Platform, target: str, *, actor: str, rebuild: bool = True, procedure: str = "reproduce", repo: Path, progress: Say | None = None
) -> ReproductionReport:
    """Reproduce the artifact ``target`` names (footer hash, unique prefix, or name) in seven recorded steps."""
    actor = platform.actor  # the identity that proved its key; the parameter is kept for callers, never recorded (docs/trust.md)
    say = progress or (lambda _message: None)
    started = time.monotonic()
    try:
        record: ArtifactRecord | None = locate_artifact(platform, target)
    except (NotFoundError, CorruptError) as exc:
        record = None
        outcome = Outcome.NOT_FOUND if isinstance(exc, NotFoundError) else Outcome.CORRUPT
        steps = [failed(1, outcome, f"not reproducible by construction: {exc}", target=target)]
        steps += [skipped(n, "no manifest: nothing to reproduce, never approximated") for n in (2, 3, 4, 5, 6)]
        extra: dict[str, Any] = {}
    if record is not None:
        m = record.manifest
        who = m["produced_by"]["identity"]
        found = f"{record.name}: manifest {record.manifest_hash} (produced {record.produced_at} by {who})"
        steps = [passed(1, found, artifact=record.name, footer=record.footer)]
        more, extra = _run_steps(platform, record, actor, rebuild=rebuild, repo=repo, say=say)
        steps += more
    return _record(platform, target, record, steps, extra, actor=actor, procedure=procedure, seconds=time.monotonic() - started)


def _record(
    platform: Platform, target: str, record: ArtifactRecord | None, steps: list[Step], extra: dict[str, Any], *, actor: str, procedure: str, seconds: float
) -> ReproductionReport:
    """Step 7: the reproduction record in the registry, attached to ``artifact:<hash>`` as a lineage activity."""
    mh = "" if record is None else record.manifest_hash
    node = f"artifact:{mh}"
    where = f"reproduction record and lineage activity on {node}" if record is not None else "reproduction record (no lineage node: no manifest)"
    steps = [*steps, passed(7, f"written: {where}")]
    outcome = verdict(steps)
    rebuilt = tuple(extra.get("rebuilt_inputs") or ())
    extra = {**extra, "artifact": None if record is None else record.name, "milliseconds": int(seconds * 1000)}
    extra["tolerance"] = None if record is None else record.manifest["precision"]
    extra["matched"] = [f"{s.number}. {s.title}" for s in steps if s.passed]
    report = ReproductionReport(
        target=target, kind="artifact", ref=f"artifact {target}" if record is None else f"artifact {record.name}", manifest_hash=mh, run_hash=None,
        outcome=outcome, checks=tuple(), rebuilt=rebuilt, environment=None, output=None, procedure=procedure, actor=actor,
        at=dt.datetime.now(dt.UTC).isoformat(), record_id=0, steps=tuple(steps), extra=extra,
        asset_key=None if record is None else asset_keys.user_string_of(asset_keys.artifact, record.name),
    )  # fmt: skip
    report = write_record(platform.registry, report)
    if record is not None:
        activity = record_activity(platform, node, "reproduction", {"record_id": report.record_id, **report.to_document()}, actor=actor)
        report = replace(report, extra={**report.extra, "activity_id": activity})
    return report


__all__ = ["EnvironmentBuildError", "RunnerError", "reproduce_artifact"]
