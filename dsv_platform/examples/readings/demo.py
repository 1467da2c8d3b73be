"""The readings demo (``dsv demo`` with ``DSV_CONFIG_DIR`` at this example's config): a quarterly number reproduced.

Lands a quarter of meter readings, builds ``readings_hourly:v1`` in a recorded Dagster run, produces the quarterly
consumption report (simulated clock), then six months later lands late readings and a correction, publishes a
rebuilt realization, lets the report's retention lapse so GC expires the realization it pinned (and Iceberg's own
retention the snapshots it pinned), and reproduces the report from its footer hash: the seven steps, printed.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import open_platform
from dsv_platform.cli.reproduce_cmd import observe
from dsv_platform.cli.runs import Runner, ui_command
from dsv_platform.core.errors import ResolutionError
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.core.retention.gc import GcPolicy
from dsv_platform.examples.readings import generator
from dsv_platform.examples.readings.demo_home import prepare_home
from dsv_platform.examples.readings.demo_print import explain, numbers, print_steps
from dsv_platform.examples.readings.landing import land_and_load
from dsv_platform.examples.readings.quarterly import produce_report
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization_inputs import REPO
from dsv_platform.services.reproduction.artifacts import ArtifactRun
from dsv_platform.services.reproduction.code_pins import checkout_of
from dsv_platform.services.reproduction.reproduce import reproduce
from dsv_platform.services.retention import gc

PRODUCED_AT = dt.datetime(2026, 4, 3, 9, 0, tzinfo=dt.UTC)  # the quarter closed; late readings and the correction not yet in
SIX_MONTHS_LATER = PRODUCED_AT + timedelta(days=183)
SNAPSHOT = "datasets/readings_hourly/v1"  # its asset key (user string)


class Story:
    """The platform, a runner on its Dagster instance (builds are recorded runs), and where the demo drops its batch files."""

    def __init__(self, platform: Platform, runner: Runner) -> None:
        self.platform = platform
        self.runner = runner
        self.folder = platform.settings.home / "demo_batches"

    def land(self, batches: Sequence[RawBatch], step: str) -> None:
        """Drop the batch files, land them write-once and load the canonical partitions they touch (what `dsv ingest` does)."""
        generator.write_batches(self.folder / step, batches)
        try:
            land_and_load(self.platform, batches)
        finally:  # landed sealed (crypto-erasable); a plaintext copy under the home would outlive a privacy deletion
            shutil.rmtree(self.folder / step, ignore_errors=True)

    def build(self) -> dict[str, Any]:
        """Materialize readings_hourly:v1 (build, gates, publication) and return its snapshot metadata."""
        result = self.runner.run([SNAPSHOT])
        mats = [e.materialization for e in result.get_asset_materialization_events() if e.materialization.asset_key.to_user_string() == SNAPSHOT]
        return {k: v.value for k, v in mats[-1].metadata.items()}


def _timed(label: str, started: float) -> None:
    print(f"  {label} ({time.perf_counter() - started:.1f} s)")


def six_months_later(story: Story, run: ArtifactRun, old: dict[str, Any]) -> None:
    """Late readings and a correction land, a rebuilt realization is published, the report's retention lapses and GC runs."""
    t0 = time.perf_counter()
    story.land([generator.late_batch()], "late-readings")
    story.land([generator.correction_batch()], "correction")
    new = story.build()
    _timed("late readings of m-004 (arrived 2026-04-05) and a correction of m-002 (2026-04-10) landed; readings_hourly:v1 rebuilt", t0)
    old_ref = str(old["ref"])
    print(f"  old {old_ref}  content {old['content_hash']}")
    print(f"  new {new['ref']}  content {new['content_hash']}")
    registry = story.platform.registry
    registry.release_retention_root(run.retention_root, actor=story.platform.actor, reason="the report's one-quarter retention lapsed")
    store, tables = story.platform.store, story.platform.existing_tables()
    plan = gc.plan(registry, store, tables=tables, landing=story.platform.existing_landing(), policy=GcPolicy(safety_window=timedelta(0)))
    applied = gc.apply_plan(plan, registry=registry, store=store, tables=tables, dry_run=False, actor=story.platform.actor)
    print(f"  the report's retention root released (one quarter lapsed); GC applied: {applied.summary()}")
    if tables is not None:
        print(f"  Iceberg's own retention then expired {gc.expire_source_snapshots(tables)} unprotected snapshot(s)")
    try:
        open_dataset(story.platform, old_ref).close()
        print(f"  {old_ref} still resolves (kept by GC)")
    except ResolutionError as exc:
        print(f"  the report's input now answers {exc.kind.name}: {old_ref}")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dsv demo", description="The readings example: a quarterly report reproduced six months later.")
    p.add_argument(
        "--repo",
        type=Path,
        help=f"a clean git checkout of this same code to pin the report to and reproduce it from (default: {REPO}, the code running)",
    )
    return p.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    home = prepare_home()
    moved = home.moved_to
    print(f"readings demo under {home.home}" + (f" (the previous run moved aside to {moved}, readable there)" if moved else " (fresh)"))
    repo = (args.repo or REPO).resolve()
    pin = checkout_of(repo)
    if pin["dirty"]:
        print(f"  note: {pin['repo']} has uncommitted changes; the report will be pinned dirty and step 2 will refuse it")
    started = time.perf_counter()
    with open_platform() as platform:
        runner = Runner.open(platform.settings, platform.config)
        try:
            story = Story(platform, runner)
            t0 = time.perf_counter()
            story.land(generator.initial_batches(), "quarter")
            built = story.build()
            _timed(f"landed Q1 2026 (meters, calibration, readings) and published {built['ref']}", t0)
            run = produce_report(platform, str(built["ref"]), clock=lambda: PRODUCED_AT, code=checkout_of(repo) if args.repo else None, actor=platform.actor)
            print(f"\nquarterly_consumption_report produced {PRODUCED_AT.isoformat()} (simulated clock)")
            print(f"  {numbers(run.results)}")
            print(f"  footer: {run.record.footer}")
            print(f"\nsix months later ({SIX_MONTHS_LATER.date().isoformat()}, simulated clock)")
            six_months_later(story, run, built)
        finally:
            runner.close()
        footer = run.manifest_hash
        print(f"\n$ dsv reproduce {footer}")
        report = reproduce(platform, footer, repo=repo, progress=lambda message: print(f"     {message}"))
        observe(platform, [report])
        print_steps(report)
        ok = explain(report, run.results, PRODUCED_AT.date().isoformat())
        settings = platform.settings
    print(f"\ndone in {time.perf_counter() - started:.0f} s")
    print(f"open the same instance in the UI, in the checkout: {ui_command(settings)}")
    return 0 if ok else 1
