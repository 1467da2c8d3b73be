"""`dsv demo`: the platform end to end on the embedded default, through the Dagster asset graph.

Lands a month of source batches (2026-06-01..30), loads the canonical Iceberg
tables, builds both label versions, publishes fraud_training_set:v5 and :v6 and
trains the fraud model, then plays the failure modes (late events, a feature
backfill, label v5 -> v6, a renamed column, a malformed batch) and rebuilds
after each. For each it prints the old realization's reference and content hash
re-read and re-verified from storage, and the new one's. The month's regular
batches are landed through the adapters the raw and canonical assets call and
reported to the instance as materializations; every later step (reloads,
labels, datasets, splits, model) is a Dagster run on the instance under
``$DSV_HOME/dagster``, so ``make ui`` shows them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.defs import build_defs
from dsv_platform.domain import SOURCES, FraudDomain, RawBatch, daily_batch, events
from dsv_platform.services.canonical_load import load_partition
from dsv_platform.services.datasets import open_dataset

START = dt.date(2026, 6, 1)
BUGGY_FEATURE_DAYS = 3  # the feature job ran with the cents bug for three days mid-month
MAIN = "fraud_training_set_v6_snapshot"


class Demo:
    def __init__(self, platform: Platform, *, days: int, rows_per_day: int) -> None:
        self.platform = platform
        settings = platform.settings
        self.days = [START + dt.timedelta(days=i) for i in range(days)]
        self.domain = FraudDomain(rows_per_day=rows_per_day)
        self.defs = build_defs(settings, rows_per_day=rows_per_day)
        (settings.home / "dagster").mkdir(parents=True, exist_ok=True)
        self.instance = dg.DagsterInstance.from_config(str(settings.home / "dagster"))
        self.zone = platform.landing
        self.tables = platform.tables
        self.failures = 0

    def run(self, selection: str, partition: str | None = None) -> dg.ExecuteInProcessResult:
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        return dg.materialize([*self.defs.assets], selection=selection, partition_key=partition, instance=self.instance, resources=self.defs.resources, run_config=quiet)

    def meta(self, result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
        mats = result.asset_materializations_for_node(asset)
        return {k: v.value for k, v in mats[-1].metadata.items()}

    def land_day(self, day: dt.date) -> None:
        """The regular daily batches, landed and loaded by the same adapters the raw and canonical assets call
        (one Dagster run per day would dominate the demo's time); recorded on the instance as materializations."""
        for spec in SOURCES.values():
            landed = self.zone.land(daily_batch(self.domain, spec.name, day))
            self.instance.report_runless_asset_event(dg.AssetMaterialization(f"raw_{spec.name}", partition=day.isoformat(), metadata={"digest": landed.digest, "rows": landed.rows}))
            load = load_partition(self.zone, self.tables, spec, day)
            self.instance.report_runless_asset_event(
                dg.AssetMaterialization(f"canonical_{spec.name}", partition=day.isoformat(), metadata={"rows": load.rows, "content_hash": load.digest.content_hash, "snapshot_id": str(load.snapshot_id)})
            )

    def ingest(self, batches: Sequence[RawBatch]) -> None:
        """Land injected batches as a source would send them, then reload the affected partitions and labels."""
        for b in batches:
            self.zone.land(b)
        for source, day in sorted({(b.source, b.day) for b in batches}):
            self.run(f"canonical_{source}", day.isoformat())
        self.labels()

    def labels(self) -> None:
        for version in ("v5", "v6"):
            self.run("labels_fraud", version)

    def publish(self) -> dict[str, dict[str, Any]]:
        result = self.run("group:datasets or group:models")
        return {name: self.meta(result, name) for name in (MAIN, "fraud_training_set_v5_snapshot", "fraud_model")}

    def show(self, title: str, old: dict[str, Any], new: dict[str, Any], *, expect_change: bool) -> None:
        reread = open_dataset(self.platform, old["ref"]).verify_content()
        same = reread == old["content_hash"]
        changed = new["content_hash"] != old["content_hash"]
        ok = same and changed == expect_change
        self.failures += not ok
        print(f"\n== {title}")
        print(f"  old {old['ref']}")
        print(f"      content hash {old['content_hash']}  re-read from storage: {reread} ({'UNCHANGED' if same else 'CHANGED (bug!)'})")
        print(f"  new {new['ref']}")
        print(f"      content hash {new['content_hash']}  ({'changed' if changed else 'unchanged'}; expected {'a change' if expect_change else 'no change'}: {'ok' if ok else 'NOT OK'})")


def _lineage(model: dict[str, Any], snapshot: dict[str, Any]) -> None:
    print("\nmodel lineage")
    print(f"  fraud_model run {model['run_manifest_hash']}  metrics {model['metrics']}  (retention root #{model['retention_root_id']})")
    print(f"  -> {model['ref']}")
    print(f"  -> manifest {model['trained_on_manifest_hash']} (content {model['trained_on_content_hash']})")
    print("  -> pinned snapshots:")
    for line in str(snapshot["pinned_snapshots"]).splitlines()[2:]:
        print(f"       {line}")


def _timed(label: str, step: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    out = step()
    print(f"  {label} ({time.perf_counter() - t0:.1f} s)")
    return out


@with_platform
def _demo(args: argparse.Namespace, platform: Platform) -> int:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    settings = platform.settings
    demo = Demo(platform, days=args.days, rows_per_day=args.rows_per_day)
    t0 = time.perf_counter()
    print(f"dsv demo under {settings.home}: {args.days} days x {args.rows_per_day} transactions, Dagster instance {settings.home / 'dagster'}")
    mid = demo.days[len(demo.days) // 3]
    buggy = [mid + dt.timedelta(days=i) for i in range(BUGGY_FEATURE_DAYS)]

    def land_month() -> None:
        for day in demo.days:
            demo.land_day(day)
        demo.ingest([events.buggy_feature_batch(demo.domain, d) for d in buggy])  # the feature job's cents bug

    _timed(f"landed and loaded {len(demo.days)} days of transactions, chargebacks, account features (features of {buggy[0]}..{buggy[-1]} buggy)", land_month)
    _timed("built labels fraud:v5 and fraud:v6", demo.labels)
    base = _timed("published fraud_training_set:v5 and :v6, checked splits, trained fraud_model", demo.publish)
    print(f"  fraud_training_set:v6 -> {base[MAIN]['ref']}")
    _lineage(base["fraud_model"], base[MAIN])

    after_month = demo.days[-1] + dt.timedelta(days=1)
    late_day = demo.days[1]
    demo.ingest([events.late_transactions(demo.domain, late_day, arrived=after_month, count=10)])
    late = demo.publish()
    demo.show(f"late events: 10 transactions of {late_day} arrive on {after_month}", base[MAIN], late[MAIN], expect_change=True)

    demo.ingest(events.feature_backfill(demo.domain, buggy[0], buggy[-1], recorded_on=after_month + dt.timedelta(days=1)))
    backfill = demo.publish()
    demo.show(f"backfill: corrected account features for {buggy[0]}..{buggy[-1]}", late[MAIN], backfill[MAIN], expect_change=True)

    demo.show("label definition v5 -> v6 applied to history (fraud_training_set:v5 vs :v6)", backfill["fraud_training_set_v5_snapshot"], backfill[MAIN], expect_change=True)

    renamed_day = demo.days[len(demo.days) // 2]
    demo.ingest([events.renamed_column_batch(demo.domain, renamed_day)])
    renamed = demo.publish()
    demo.show(f"renamed column: {renamed_day} re-sent with merchant_risk renamed merchant_risk_score (compatibility view)", backfill[MAIN], renamed[MAIN], expect_change=False)

    bad_day = demo.days[-2]
    demo.ingest([events.malformed_batch(demo.domain, bad_day)])
    malformed = demo.publish()
    demo.show(f"malformed batch: {bad_day} re-sent with 4 broken rows (quarantined, nothing else lost)", renamed[MAIN], malformed[MAIN], expect_change=False)

    _lineage(malformed["fraud_model"], malformed[MAIN])
    print(f"\ndone in {time.perf_counter() - t0:.0f} s; {'all checks ok' if not demo.failures else f'{demo.failures} check(s) NOT OK'}")
    print(f"open the same instance in the UI: make ui   (or DAGSTER_HOME={settings.home / 'dagster'} .venv/bin/dagster dev -w workspace.yaml)")
    return 0 if not demo.failures else 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help="run the demo on the embedded default (no servers needed)")
    p.add_argument("--days", type=int, default=30, help="days of sample batches from 2026-06-01 (default 30)")
    p.add_argument("--rows-per-day", type=int, default=300, help="transactions per day (default 300)")
    p.set_defaults(handler=_demo)
