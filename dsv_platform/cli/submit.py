"""``--submit [URL]``: send ``dsv build``/``dsv ingest``'s run to the production instance's webserver and follow it.

Without ``--submit`` the commands run in this process on the embedded default's instance (``dagster.materialize``).
With it the run goes through the instance's run queue, its run launcher and its concurrency limits (one publication run
at a time, deploy/README.md), as a run launched from the UI would; this process prints the run's progress on stderr
(queued, started, each step and the stage lines the assets log) and, when the run ends, the same summary as the
in-process command. A failed run is the same typed exit code as in process, naming the run; Ctrl-C stops following,
not the run (DETACHED, naming where to follow it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.adapters.webserver.graphql import TERMINAL, RunEvent, Webserver
from dsv_platform.cli.runs import RunFailedError, kind_of, without_class
from dsv_platform.core.errors import AccessDeniedError, DsvError, EnvironmentSetupError, FailureKind
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.services.trust.launch import PARTITION_TAG
from dsv_platform.settings import Settings

ASSET_JOB = "__ASSET_JOB"
"""The instance's implicit job of every asset: an ad-hoc selection of assets runs as it (as the UI's "Materialize" does)."""
POLL_SECONDS = 1.0
"""How often the run's status and new events are read."""
WAITING_NOTE_SECONDS = 30.0
"""How often a run still waiting in the queue says so."""
WAITING = frozenset({"QUEUED", "NOT_STARTED", "STARTING"})
LEVELS = {"WARNING": "warning: ", "ERROR": "", "CRITICAL": ""}


class RunDetachedError(DsvError):
    """Following a submitted run was interrupted (Ctrl-C); the run goes on on the instance."""

    kind = FailureKind.DETACHED


@dataclass
class SubmittedRun:
    """What a followed run produced: its id, each asset's last materialization's values, its check evaluations."""

    run_id: str
    materializations: dict[str, dict[str, Any]] = field(default_factory=dict)
    checks: list[tuple[str, str, bool]] = field(default_factory=list)  # (asset, check, passed)
    failures: list[RunEvent] = field(default_factory=list)

    def check_lines(self) -> list[str]:
        """As :func:`dsv_platform.cli.runs.check_lines` words them."""
        return [f"{asset}.{check}: {'passed' if passed else 'FAILED'}" for asset, check, passed in self.checks]


def add_submit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--submit",
        nargs="?",
        const="",
        metavar="URL",
        help="send the run to the production instance's Dagster webserver (URL, default DSV_DAGSTER_URL) through its run queue "
        "and follow it; without it the run executes in this process",
    )


def webserver(args: argparse.Namespace, settings: Settings) -> Webserver | None:
    """The webserver ``--submit`` names (its URL, else ``DSV_DAGSTER_URL``); None without ``--submit``."""
    if args.submit is None:
        return None
    url = args.submit or settings.dagster_url
    if not url:
        raise EnvironmentSetupError("--submit needs the webserver's URL: --submit http://HOST:3000 or DSV_DAGSTER_URL")
    return Webserver(url)


def partition_tags(days: tuple[dt.date, dt.date] | None) -> dict[str, str]:
    """The run tags of one day's partition or a day range (one run, the daily assets' single-run backfill), as :meth:`Runner.run` sets them."""
    if days is None:
        return {}
    if days[0] == days[1]:
        return {PARTITION_TAG: days[0].isoformat()}
    return {RANGE_START: days[0].isoformat(), RANGE_END: days[1].isoformat()}


def _say(line: str) -> None:
    print(f"dsv: {line}", file=sys.stderr, flush=True)


RUN_EVENTS = {
    "RunEnqueuedEvent": "queued",
    "RunDequeuedEvent": "dequeued by the daemon",
    "RunStartingEvent": "starting",  # the daemon dequeued it (QueuedRunCoordinator): the run launcher starts it
    "RunStartEvent": "started",
    "RunSuccessEvent": "succeeded",
    "RunFailureEvent": "failed",
    "RunCanceledEvent": "canceled",
}
STEP_EVENTS = {"ExecutionStepStartEvent": "started", "ExecutionStepSuccessEvent": "done", "ExecutionStepFailureEvent": "FAILED"}


def _show(event: RunEvent, run_id: str, say: Callable[[str], None]) -> None:
    step = f"{event.step}: " if event.step else ""
    if event.kind in RUN_EVENTS:
        say(f"run {run_id} {RUN_EVENTS[event.kind]}")
    elif event.kind in STEP_EVENTS:
        say(f"{step}{STEP_EVENTS[event.kind]}")
    elif event.kind == "ExecutionStepUpForRetryEvent":
        say(f"{step}up for retry ({event.message})")
    elif event.kind == "LogMessageEvent" and event.level in ("INFO", *LEVELS):
        say(f"{LEVELS.get(event.level, '')}{event.message}")
    elif event.kind == "MaterializationEvent":
        say(f"materialized {event.asset}" + (f" ({event.partition})" if event.partition else ""))


def _record(run: SubmittedRun, event: RunEvent) -> None:
    if event.kind == "MaterializationEvent" and event.asset is not None:
        run.materializations[event.asset] = event.metadata
    elif event.kind == "AssetCheckEvaluationEvent" and event.asset is not None and event.check is not None:
        run.checks.append((event.asset, *event.check))
    elif event.kind in ("ExecutionStepFailureEvent", "RunFailureEvent") and event.errors:
        run.failures.append(event)


def _failed(server: Webserver, run: SubmittedRun, status: str) -> DsvError:
    """The run's failure as the in-process path words it: failing steps and their errors, the platform error's kind."""
    chains = [[name for name, _ in e.errors] for e in run.failures]
    for e in run.failures:
        for name, message in e.errors:
            if name == AccessDeniedError.__name__:  # a grant refused inside the run: exit 7, as before it
                return AccessDeniedError(f"run {run.run_id}: {message.strip().splitlines()[0].split('ACCESS_DENIED: ', 1)[-1]}")
    steps = [e for e in run.failures if e.step] or run.failures
    why = "; ".join(f"{e.step + ': ' if e.step else ''}{without_class((e.errors[1:] or e.errors)[0][1].strip().splitlines()[0] or 'failed')}" for e in steps)
    verb = "was canceled" if status == "CANCELED" else "failed"
    return RunFailedError(f"run {run.run_id} {verb}: {why or 'see the run'} (events: {server.run_url(run.run_id)})", step_kind=kind_of(chains))


def follow(server: Webserver, run_id: str, *, say: Callable[[str], None] = _say, interval: float | None = None) -> SubmittedRun:
    """Poll the run until it ends, printing its progress from its events; the run, or its failure raised (:class:`RunFailedError`, typed)."""
    run, status, cursor = SubmittedRun(run_id), "", None
    noted = time.monotonic()
    say(f"run {run_id} submitted to {server.shown} (follow it in the UI: {server.run_url(run_id)})")
    try:
        while True:
            poll = server.poll(run_id, cursor)
            cursor = poll.cursor
            for event in poll.events:
                _show(event, run_id, say)
                _record(run, event)
            if poll.status != status:
                status, noted = poll.status, time.monotonic()
            elif status in WAITING and time.monotonic() - noted >= WAITING_NOTE_SECONDS:
                noted = time.monotonic()
                say(f"run {run_id} still {status.lower().replace('_', ' ')}: waiting for the instance's run queue (its concurrency limits)")
            if status in TERMINAL:
                break
            time.sleep(POLL_SECONDS if interval is None else interval)
    except KeyboardInterrupt:
        raise RunDetachedError(f"stopped following run {run_id}; the run goes on on the instance: {server.run_url(run_id)}") from None
    if status != "SUCCESS":
        raise _failed(server, run, status)
    return run


def submit(
    server: Webserver, job: str, *, tags: dict[str, str], run_config: dict[str, Any] | None = None, assets: list[list[str]] | None = None
) -> SubmittedRun:
    """Launch one run of ``job`` on the instance and follow it to its end."""
    try:
        run_id = server.launch_run(job, tags=tags, run_config=run_config, assets=assets)
    except KeyboardInterrupt:  # the launch may have reached the instance: say where to look, never a traceback
        raise RunDetachedError(f"interrupted while submitting {job}; the run may be queued on the instance: {server.shown}/runs") from None
    return follow(server, run_id)
