"""Running the platform's assets as recorded Dagster runs on the instance under ``settings.dagster_home``.

``dsv ingest``, ``dsv build`` and the demo execute the same assets the UI and
the schedules do, in process, on the same instance: ``make ui`` shows the runs
and their checks. A partition range runs as one run (single-run backfill).
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from dsv_platform.cli.event_log import keep_engines
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.errors import AccessDeniedError, DsvError, FailureKind
from dsv_platform.core.progress.stages import Progress
from dsv_platform.defs import build_defs
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.defs.resources import build_resources
from dsv_platform.settings import Settings, load_settings

IN_PROCESS_JOB = "__ephemeral_asset_job__"
"""The job name of a run :meth:`Runner.run` executes (``dagster.materialize``): what its launch request names."""
QUIET: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
"""The console stays quiet: a failed run is one ``dsv`` line naming the log file that holds Dagster's events and stack traces."""


class UnknownNameError(DsvError):
    """A source or dataset the configuration does not name (the message lists the known ones)."""


class RunFailedError(DsvError):
    """A Dagster run failed; the message names the run and the failing steps.

    Its exit code is that of the platform error that failed the step (``step_kind``: a missing snapshot, a
    blocking gate, a refused grant, ...), else FAILED's.
    """

    kind = FailureKind.FAILED

    def __init__(self, message: str, *, step_kind: FailureKind | None = None) -> None:
        super().__init__(message)
        if step_kind is not None:
            vars(self)["kind"] = step_kind  # this instance's kind (the class keeps FAILED)


DAGSTER_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
"""The embedded default's Dagster instance configuration: default storage, no telemetry, one slot per pool (the publication pool)."""


def ui_command(settings: Settings) -> str:
    """``make ui`` with the variables that make it serve this home: none for ``./.dsv`` and the packaged configuration."""
    here = load_settings({})
    given = [("DSV_HOME", settings.home, here.home), ("DSV_CONFIG_DIR", settings.config_dir, here.config_dir)]
    given.append(("DAGSTER_HOME", settings.dagster_home, settings.home.resolve() / "dagster"))
    return " ".join([f"{name}={Path(value).resolve()}" for name, value, default in given if Path(value).resolve() != Path(default).resolve()] + ["make ui"])


def ensure_dagster_yaml(dagster_home: Path) -> bool:
    """Write ``dagster.yaml`` (telemetry disabled) into ``dagster_home`` if it has none; never overwrite one. True when written."""
    dagster_home.mkdir(parents=True, exist_ok=True)
    try:
        with (dagster_home / "dagster.yaml").open("x", encoding="utf-8") as f:
            f.write(DAGSTER_YAML)
    except FileExistsError:
        return False
    return True


def open_instance(settings: Settings) -> dg.DagsterInstance:
    """The persistent Dagster instance in ``settings.dagster_home`` (created on first use, with its dagster.yaml if absent)."""
    ensure_dagster_yaml(settings.dagster_home)
    return keep_engines(dg.DagsterInstance.from_config(str(settings.dagster_home)))


def failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per failed step: the step and the error message."""
    lines = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            cause = error.cause if error is not None and error.cause is not None else error
            message = cause.message.strip().splitlines()[0] if cause is not None and cause.message else "failed"
            lines.append(f"{event.step_key}: {without_class(message)}")
    return lines


def _errors(event: Any) -> list[Any]:
    """A step failure's error and its causes, outermost first."""
    error = event.step_failure_data.error if event.is_step_failure and event.step_failure_data is not None else None
    chain = []
    while error is not None:
        chain.append(error)
        error = error.cause
    return chain


def _dsv_errors() -> dict[str, type[DsvError]]:
    found: dict[str, type[DsvError]] = {}
    pending: list[type[DsvError]] = [DsvError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


def kind_of(chains: Iterable[Sequence[str]]) -> FailureKind:
    """The failure kind of the first error chain (class names, outermost first) holding a platform error: its innermost DsvError's; else FAILED."""
    known = _dsv_errors()
    for chain in chains:
        for name in reversed(chain):
            cls = known.get(name)
            if cls is not None and cls is not DsvError:
                return cls.kind
    return RunFailedError.kind


def failure_kind(result: dg.ExecuteInProcessResult) -> FailureKind:
    """The failure kind of the first failed step's platform error (the innermost DsvError of its chain), else FAILED."""
    return kind_of([e.cls_name for e in _errors(event)] for event in result.all_events)


def write_run_log(folder: Path, result: dg.ExecuteInProcessResult) -> Path:
    """Every event of the run, with full stack traces of failures, as ``<folder>/<run id>.log``; the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result.run_id}.log"
    lines = []
    for event in result.all_events:
        lines.append(f"{event.event_type_value} {event.step_key or '-'}: {event.message or ''}".rstrip())
        for error in _errors(event):
            lines.append(error.to_string().rstrip())
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def access_denied(result: dg.ExecuteInProcessResult) -> str | None:
    """The message of the first step that failed with AccessDeniedError (a missing grant), else None."""
    for event in result.all_events:
        error = event.step_failure_data.error if event.is_step_failure and event.step_failure_data is not None else None
        while error is not None:
            if error.cls_name == AccessDeniedError.__name__:
                return error.message.strip().splitlines()[0].split("ACCESS_DENIED: ", 1)[-1]
            error = error.cause
    return None


def without_class(message: str) -> str:
    """``pkg.module.SomeError: text`` -> ``text`` (the error's own words, in dsv terms)."""
    head, sep, rest = message.partition(": ")
    return rest if sep and "." in head and " " not in head and head.split(".")[-1][:1].isupper() else message


def asset_metadata(result: dg.ExecuteInProcessResult, asset: dg.AssetKey | str) -> dict[str, Any]:
    """The values of the last materialization's metadata of ``asset`` (a key or its user string) in ``result``."""
    key = asset if isinstance(asset, dg.AssetKey) else dg.AssetKey.from_user_string(asset)
    mats = [e.materialization for e in result.get_asset_materialization_events() if e.materialization.asset_key == key]
    if not mats:
        return {}
    return {k: v.value for k, v in mats[-1].metadata.items()}


def staged_lines(result: dg.ExecuteInProcessResult) -> list[str]:
    """One line per failed check naming a staging branch (a blocked canonical load: main unchanged, docs/storage.md)."""
    lines = []
    for c in result.get_asset_check_evaluations():
        branch, head = c.metadata.get("staging_branch"), c.metadata.get("staged_snapshot_id")
        if not c.passed and branch is not None:
            staged = f"Iceberg branch {branch.value} (snapshot {head.value if head else '?'})"
            lines.append(f"{c.asset_key.to_user_string()}: main unchanged, the load is staged on {staged}")
    return sorted(set(lines))


def check_lines(result: dg.ExecuteInProcessResult) -> list[str]:
    return [f"{c.asset_key.to_user_string()}.{c.check_name}: {'passed' if c.passed else 'FAILED'}" for c in result.get_asset_check_evaluations()]


@dataclass
class Runner:
    """The platform's Definitions and the instance they run on."""

    defs: dg.Definitions
    instance: dg.DagsterInstance
    log_folder: Path | None = None
    """Where a failed run's Dagster log is written (``<dagster home>/logs``)."""
    resources: Mapping[str, Any] | None = None
    """The run's resources (default: the Definitions'); :meth:`open` binds a progress reporter into them."""

    @classmethod
    def open(cls, settings: Settings, config: PlatformConfig | None = None, *, progress: Progress | None = None) -> Runner:
        """``progress``: told every stage of the assets the runs execute (they run in this process), besides each run's event log."""
        for category in (dg.BetaWarning, dg.PreviewWarning):
            warnings.filterwarnings("ignore", category=category)
        defs = build_defs(settings, config)
        resources = {**(defs.resources or {}), **build_resources(settings, progress=progress)} if progress is not None else None
        return cls(defs, open_instance(settings), settings.dagster_home / "logs", resources)

    def run(
        self,
        selection: str | Sequence[str] | Sequence[dg.AssetKey],
        *,
        partition: str | None = None,
        days: tuple[dt.date, dt.date] | None = None,
        run_config: Mapping[str, Any] | None = None,
        check: bool = True,
        launch: Mapping[str, str] | None = None,
    ) -> dg.ExecuteInProcessResult:
        """Materialize ``selection`` (asset keys, their user strings or a selection string) as one run, over one partition or the day range ``days``.

        ``check``: raise :class:`RunFailedError` when the run failed. ``launch``: the launcher's signed launch request tags.
        """
        tags: dict[str, str] = dict(launch or {})
        if days is not None and days[0] == days[1]:
            partition = days[0].isoformat()
        elif days is not None:
            tags |= {RANGE_START: days[0].isoformat(), RANGE_END: days[1].isoformat()}
        result = dg.materialize(
            [a for a in self.defs.assets or () if isinstance(a, dg.AssetsDefinition)],
            selection=selection if isinstance(selection, str) else [dg.AssetKey.from_user_string(s) if isinstance(s, str) else s for s in selection],
            partition_key=partition,
            tags=tags,
            instance=self.instance,
            resources=self.resources if self.resources is not None else self.defs.resources,
            run_config={**QUIET, **(run_config or {})},
            raise_on_error=False,
        )
        if check and not result.success:
            denied = access_denied(result)
            if denied is not None:  # a grant refused inside the run: the same exit code (7) as a refusal before it
                raise AccessDeniedError(f"run {result.run_id}: {denied}")
            why = "; ".join(failure_messages(result) + staged_lines(result)) or "see the run in the Dagster UI"
            log = f" (Dagster log: {write_run_log(self.log_folder, result)})" if self.log_folder is not None else ""
            raise RunFailedError(f"run {result.run_id} failed: {why}{log}", step_kind=failure_kind(result))
        return result

    def close(self) -> None:
        self.instance.dispose()
