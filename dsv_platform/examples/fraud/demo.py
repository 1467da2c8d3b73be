"""The fraud demo (``dsv demo``): the platform end to end through recorded Dagster runs.

Lands a month of generated batches, builds and publishes the training sets, trains the
model, then plays the failure modes, showing each time that the old realization still
re-reads and re-verifies from storage beside the new one.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import open_platform
from dsv_platform.cli.runs import Runner, ui_command
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.defs import keys
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.demo_diff import label_diff
from dsv_platform.examples.fraud.demo_home import prepare_home
from dsv_platform.examples.fraud.demo_privacy import play as play_privacy
from dsv_platform.examples.fraud.demo_rehearsal import rehearse_once
from dsv_platform.examples.fraud.demo_release import incident_walk, release
from dsv_platform.examples.fraud.demo_schema import report_rename
from dsv_platform.examples.fraud.demo_semantic import play as play_semantic
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.datasets import open_dataset

START = dt.date(2026, 6, 1)
BUGGY_FEATURE_DAYS = 3  # the feature job ran with the cents bug for three days mid-month
MAIN, V5 = "datasets/fraud_training_set/v6", "datasets/fraud_training_set/v5"  # asset keys (user strings)
MODEL = "models/fraud_model"
SOURCES = ("transactions", "chargebacks", "account_features")


class Demo:
    def __init__(self, platform: Platform, runner: Runner, *, days: int, rows_per_day: int, reused: bool) -> None:
        self.platform = platform
        self.runner = runner
        self.days = [START + dt.timedelta(days=i) for i in range(days)]
        self.domain = FraudDomain(rows_per_day=rows_per_day)
        self.folder = platform.settings.home / "demo_batches"
        self.reused = reused
        self.failures = 0

    def write(self, batches: Sequence[RawBatch], step: str) -> list[Path]:
        """The batches as the source would drop them: files named for the drop folder."""
        folder = self.folder / step
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for b in batches:
            path = folder / b.file_name
            path.write_bytes(b.data)
            paths.append(path)
        return paths

    def land(self, batches: Sequence[RawBatch], step: str) -> None:
        """One run landing (raw/*) and loading (canonical/*) every batch, over the days they cover.

        The story's arrival times are a historical load (each file's recorded time named: operator, audited; docs/trust.md).
        """
        paths = self.write(batches, step)
        sources = sorted({b.source for b in batches})
        days = sorted({b.day for b in batches})
        ops = {keys.op_name(keys.raw(s)): {"config": _historical(paths, batches, s)} for s in sources}
        try:
            self.runner.run([a for s in sources for a in (keys.raw(s), keys.canonical(s))], days=(days[0], days[-1]), run_config={"ops": ops})
        finally:  # landed sealed (crypto-erasable); a plaintext copy under the home would outlive a privacy deletion
            shutil.rmtree(self.folder / step, ignore_errors=True)

    def ingest(self, batches: Sequence[RawBatch], step: str) -> None:
        self.land(batches, step)
        self.labels()

    def labels(self) -> None:
        for version in ("v5", "v6"):
            self.runner.run([keys.label("fraud")], partition=version)

    def publish(self) -> dict[str, dict[str, Any]]:
        result = self.runner.run("group:datasets or group:models")
        meta = {e.materialization.asset_key.to_user_string(): e.materialization.metadata for e in result.get_asset_materialization_events()}
        return {name: {k: v.value for k, v in meta[name].items()} for name in (MAIN, V5, MODEL)}

    def show(self, title: str, old: dict[str, Any], new: dict[str, Any], *, expect_change: bool, replayed: bool = True) -> None:
        reread = open_dataset(self.platform, old["ref"]).verify_content()
        same = reread == old["content_hash"]
        changed = new["content_hash"] != old["content_hash"]
        again = replayed and self.reused  # this event was applied to the reused home before: any outcome of the rebuild is consistent
        ok = same and (again or changed == expect_change)
        self.failures += not ok
        expected = "already applied to this home, rebuilt from the same inputs" if again else f"expected {'a change' if expect_change else 'no change'}"
        print(f"\n== {title}")
        print(f"  old {old['ref']}")
        print(f"      content hash {old['content_hash']}  re-read from storage: {reread} ({'UNCHANGED' if same else 'CHANGED (bug!)'})")
        print(f"  new {new['ref']}")
        print(f"      content hash {new['content_hash']}  ({'changed' if changed else 'unchanged'}; {expected}: {'ok' if ok else 'NOT OK'})")



def _historical(paths: Sequence[Path], batches: Sequence[RawBatch], source: str) -> dict[str, Any]:
    """The raw asset's config landing ``source``'s files, each recorded when the story says it arrived."""
    mine = [(str(p), b) for p, b in zip(paths, batches, strict=True) if b.source == source]
    return {"files": [p for p, _ in mine], "recorded_at_files": {p: b.recorded_at.isoformat() for p, b in mine}}


def _lineage(model: dict[str, Any], snapshot: dict[str, Any]) -> None:
    print("\nmodel lineage")
    print(f"  fraud_model run {model['run_manifest_hash']}  metrics {model['metrics']}  (retention root #{model['retention_root_id']})")
    print(f"  -> {model['ref']}")
    print(f"  -> manifest {model['trained_on_manifest_hash']} (content {model['trained_on_content_hash']})")
    print("  -> pinned snapshots:")
    for record in snapshot["pinned_snapshots"].records:  # the asset's metadata table: table, snapshot id, tag
        row = record.data
        print(f"       | {row['table']} | {row['snapshot id']} | {row['tag']} |")
    pins = model.get("model_pins")
    if pins is not None:  # the tags named for the model: kept while it is retained, then aged out (docs/gc-and-privacy.md)
        print("  -> model pins:")
        for record in pins.records:
            print(f"       | {record.data['table']} | {record.data['snapshot id']} | {record.data['tag']} |")


def _timed(label: str, step: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = step()
    print(f"  {label} ({time.perf_counter() - t0:.1f} s)")
    return out


def _buggy_days(demo: Demo) -> list[dt.date]:
    mid = demo.days[len(demo.days) // 3]
    return [mid + dt.timedelta(days=i) for i in range(BUGGY_FEATURE_DAYS)]


def _base(demo: Demo) -> dict[str, dict[str, Any]]:
    buggy = _buggy_days(demo)

    def land_month() -> None:
        demo.land([events.daily_batch(demo.domain, s, d) for s in SOURCES for d in demo.days], "month")
        demo.land([events.buggy_feature_batch(demo.domain, d) for d in buggy], "buggy-features")  # the feature job's cents bug

    _timed(f"landed and loaded {len(demo.days)} days of {', '.join(SOURCES)} in ranged runs (features of {buggy[0]}..{buggy[-1]} buggy)", land_month)
    _timed("built labels fraud:v5 and fraud:v6", demo.labels)
    base: dict[str, dict[str, Any]] = _timed("published fraud_training_set:v5 and :v6, checked splits, trained fraud_model", demo.publish)
    print(f"  fraud_training_set:v6 -> {base[MAIN]['ref']}")
    _lineage(base[MODEL], base[MAIN])
    return base


def _failure_modes(demo: Demo, base: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    after_month = demo.days[-1] + dt.timedelta(days=1)
    late_day = demo.days[1]
    demo.ingest([events.late_transactions(demo.domain, late_day, arrived=after_month, count=10)], "late-events")
    late = demo.publish()
    demo.show(f"late events: 10 transactions of {late_day} arrive on {after_month}", base[MAIN], late[MAIN], expect_change=True)

    first, last = _buggy_days(demo)[0], _buggy_days(demo)[-1]
    demo.ingest(events.feature_backfill(demo.domain, first, last, recorded_on=after_month + dt.timedelta(days=1)), "feature-backfill")
    backfill = demo.publish()
    demo.show(f"backfill: corrected account features for {first}..{last}", late[MAIN], backfill[MAIN], expect_change=True)

    title = "label definition v5 -> v6 applied to history (fraud_training_set:v5 vs :v6)"
    demo.show(title, backfill[V5], backfill[MAIN], expect_change=True, replayed=False)

    renamed_day = demo.days[len(demo.days) // 2]
    demo.ingest([events.renamed_column_batch(demo.domain, renamed_day)], "renamed-column")
    renamed = demo.publish()
    title = f"renamed column: {renamed_day} re-sent with merchant_risk renamed merchant_risk_score, now a vendor score (compatibility view)"
    demo.show(title, backfill[MAIN], renamed[MAIN], expect_change=False)
    demo.failures += report_rename(demo.platform.config)  # same bytes, changed meaning: the schema diff flags what the hash cannot

    bad_day = demo.days[-2]
    demo.ingest([events.malformed_batch(demo.domain, bad_day)], "malformed-batch")
    malformed = demo.publish()
    demo.show(f"malformed batch: {bad_day} re-sent with 4 broken rows (quarantined, nothing else lost)", renamed[MAIN], malformed[MAIN], expect_change=False)
    return malformed


def _incident(demo: Demo) -> None:
    """From the buggy feature batch of the first buggy day (batch id ``daily``, as every daily batch: its digest names the revision)."""
    day = _buggy_days(demo)[0]
    batch = events.buggy_feature_batch(demo.domain, day)
    incident_walk(demo.platform, f"raw_batch:{batch.batch_id}@{hashlib.sha256(batch.data).hexdigest()}", f"the buggy account_features batch of {day}")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dsv demo", description="The fraud example end to end through recorded Dagster runs.")
    p.add_argument("--days", type=int, default=30, help="days of sample batches from 2026-06-01 (default 30, at least 4)")
    p.add_argument("--rows-per-day", type=int, default=300, help="transactions per day (default 300)")
    args = p.parse_args(list(argv))
    if args.days < 4:
        p.error("--days must be at least 4")
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    reused = prepare_home()
    t0 = time.perf_counter()
    with open_platform() as platform:
        settings = platform.settings
        runner = Runner.open(settings, platform.config)
        try:
            print(f"dsv demo under {settings.home}: {args.days} days x {args.rows_per_day} transactions, Dagster instance {settings.dagster_home}")
            demo = Demo(platform, runner, days=args.days, rows_per_day=args.rows_per_day, reused=reused)
            final = _failure_modes(demo, _base(demo))
            final = label_diff(demo)  # later chargebacks arrive; dsv diff v5 -> v6 shows the label flips
            release(platform, final[MODEL], why="the model trained after the failure modes")
            _incident(demo)  # which datasets included the bad batch, which models trained on them, which deployment serves them
            final = play_privacy(platform, demo.domain, START, demo.publish)  # a deletion's obligation closed by a retrain
            demo.failures += play_semantic(platform)  # cents and test-account leaks, blocked at publication (a scratch home)
            rehearse_once(runner)  # a point of the reconstructability time series in the UI
        finally:
            runner.close()
    _lineage(final[MODEL], final[MAIN])
    print(f"\ndone in {time.perf_counter() - t0:.0f} s; {'all checks ok' if not demo.failures else f'{demo.failures} check(s) NOT OK'}")
    print(f"open the same instance in the UI, in the checkout: {ui_command(settings)}")
    return 0 if not demo.failures else 1
