"""`dsv reproduce ARTIFACT_OR_FOOTER_HASH` (or a dataset ref, realization or run hash), `dsv rehearse`, `dsv promote RUN_HASH`, `dsv status`.

``reproduce`` (an artifact: its seven numbered steps) and ``rehearse`` exit 0 when everything was
reconstructable and FAILED's exit code otherwise (the outcome and its reason are printed); ``promote``
exits with PROMOTION_REFUSED's when the promotion gate refuses (core/publication/failures.py). When the Dagster instance of the embedded default
exists (``$DSV_HOME/dagster``), each reproduction is also reported there as an
observation on its asset, so it shows in the asset's lineage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication.failures import exit_code
from dsv_platform.services.publication.status import platform_status
from dsv_platform.services.reproduction.promotion import promote
from dsv_platform.services.reproduction.rehearsal import full_rehearsal, rehearse
from dsv_platform.services.reproduction.reproduce import ReproductionReport, reproduce


def observe(platform: Platform, reports: list[ReproductionReport]) -> int:
    """Report each reproduction as a runless AssetObservation on the local Dagster instance, if there is one."""
    home = platform.home / "dagster"
    if not home.is_dir():
        return 0
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home))
    count = 0
    for r in reports:
        if r.asset_key is None:
            continue
        instance.report_runless_asset_event(
            dg.AssetObservation(
                dg.AssetKey.from_user_string(r.asset_key),
                description=f"{r.procedure}: {r.outcome.value}",
                metadata={
                    "outcome": dg.MetadataValue.text(r.outcome.value),
                    "ref": dg.MetadataValue.text(r.ref),
                    "run_hash": dg.MetadataValue.text(r.run_hash or ""),
                    "reason": dg.MetadataValue.text(r.reason),
                    "rebuilt": dg.MetadataValue.json(list(r.rebuilt)),
                    "record_id": dg.MetadataValue.int(r.record_id),
                },
            )
        )
        count += 1
    return count


MARK = {"passed": "ok  ", "failed": "FAIL", "skipped": "skip"}


def print_steps(report: ReproductionReport) -> None:
    """The seven numbered steps of an artifact's reproduction (number, mark, title, one-line summary), then the verdict."""
    print(f"reproducing {report.ref} ({report.manifest_hash or report.target})")
    for s in report.steps:
        print(f"  {s.number}. {MARK[s.status.value]} {s.title}: {s.summary}")
    for note in report.rebuilt:
        print(f"     rebuilt: {note}")
    print(f"  verdict: {report.outcome.value} (reproduction record {report.record_id})")


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@with_platform
def _reproduce(args: argparse.Namespace, platform: Platform) -> int:
    report = reproduce(platform, args.target, rebuild=not args.no_rebuild, progress=_progress)
    observe(platform, [report])
    if args.json:
        print(json.dumps(report.to_document(), indent=2, default=str))
    elif report.steps:
        print_steps(report)
    else:
        print(f"{report.outcome.value}: {report.ref} (record {report.record_id})")
        for c in report.checks:
            print(f"  {'ok  ' if c.passed else 'FAIL'} {c.step}" + ("" if c.passed else f": {json.dumps(dict(c.detail), default=str)}"))
        for note in report.rebuilt:
            print(f"  rebuilt: {note}")
    return 0 if report.reconstructable else exit_code(FailureKind.FAILED)


@with_platform
def _rehearse(args: argparse.Namespace, platform: Platform) -> int:
    if args.full:
        run = full_rehearsal(platform, period_weeks=args.period_weeks)
    else:
        run = rehearse(platform, period_days=args.period_days)
    observe(platform, list(run.reports))
    doc = run.to_document()
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0 if not run.failures else exit_code(FailureKind.FAILED)
    head = "fully reproduced" if args.full else "reconstructable today"
    print(f"{head}: {doc['reconstructable']} of {doc['rehearsed']} sampled ({doc['fraction']:.0%}); {doc['retained_models']} retained models and artifacts")
    for r in doc["results"]:
        print(f"  {r['outcome']:<26} {r['kind']:<8} {r['target']}  {'' if r['outcome'].startswith('REPRODUCED') else r['reason']}")
    return 0 if not run.failures else exit_code(FailureKind.FAILED)


@with_platform
def _promote(args: argparse.Namespace, platform: Platform) -> int:
    done = promote(platform, args.run_hash, alias=args.alias)
    doc = done.to_document()
    print(json.dumps(doc, indent=2) if args.json else f"promoted {doc['model']} -> {doc['alias_ref']} ({doc['ref']})")
    return 0


STATUS_LEGEND = (
    "usable: the newest readable realization whose quality report passed every gate, warnings included "
    "('none passing every warning' when the newest readable one failed a warning gate: it still resolves); "
    "resolves: what `dsv resolve NAME:VERSION` gives (the newest readable publication) and the aliases at it (@production); "
    "fresh: time since it was published; publication lag: its publication time minus its watermark, the newest "
    "recorded time (_recorded_at) among the rows it read: how long data waited between being recorded and being publishable; "
    "lag from valid time: event (publication time minus the end of the newest observation day it holds) = arrival "
    "(watermark minus that valid time: upstream truth late) + compute (publication lag: our build); "
    "health: the data reads of open_dataset handles (time to first byte, throughput, missing and corrupt objects)"
)


def _fmt(seconds: Any) -> str:
    return "-" if seconds is None else f"{float(seconds) / 3600:.1f} h"


def _resolution_lines(s: dict[str, Any]) -> list[str]:
    """The first lines of one definition: usable, then what resolves when it is another realization (issue 23 item 7)."""
    readable = s.get("readable")
    head = f"{s['ref']}: usable: {s['usable_ref']}; fresh {_fmt(s['freshness_seconds'])}; publication lag {_fmt(s['publication_lag_seconds'])}"
    if readable is None:
        return [head if s["usable_ref"] else f"{s['ref']}: usable: none", "  resolves to nothing yet: no readable realization"]
    warn = f", warn: {', '.join(readable['warnings'])}" if readable["warnings"] else ""
    if s["usable_ref"] is None:
        head = f"{s['ref']}: usable: none passing every warning; newest readable {readable['ref']} {readable['state']}{warn}"
    elif readable["ref"] == s["usable_ref"]:
        return [head] + ([f"  aliases: {', '.join(readable['aliases'])}"] if readable["aliases"] else [])
    at = "".join(f"; {a}" for a in readable["aliases"])
    lag = _fmt(readable["publication_lag_seconds"])
    return [head, f"  resolves to {readable['ref']} ({readable['state']}{warn}; `dsv resolve {s['ref']}`{at}): publication lag {lag}"]


def _lag_line(lag: dict[str, Any] | None) -> list[str]:
    if not lag or lag.get("event_s") is None:
        return []
    return [f"  lag from valid time: event {_fmt(lag['event_s'])} = arrival {_fmt(lag['arrival_s'])} (upstream) + compute {_fmt(lag['compute_s'])} (build)"]


def _health_line(version: str, c: dict[str, Any]) -> str:
    ttfb = "-" if c["ttfb_p50_s"] is None else f"{c['ttfb_p50_s']:.3f} s (max {c['ttfb_max_s']:.3f} s)"
    speed = "-" if c["bytes_per_s"] is None else f"{c['bytes_per_s'] / 1e6:.1f} MB/s, {c['rows_per_s']:.0f} rows/s"
    return (
        f"  health of {version}: {c['consumers']} consumers, {c['data_reads']} data reads, time to first byte p50 {ttfb}, "
        f"throughput {speed}, missing {c['missing']}, corrupt {c['corrupt']}"
    )


def _build_line(s: dict[str, Any]) -> str:
    """Build health; rows, bytes and stages are the usable realization's, so without one they are not printed as zeros."""
    tried = f"{s['attempts']} attempts, {s['gate_failures']} gate failures"
    if s["usable_ref"] is None:
        return f"  build: no realization passing every gate yet (rows and stages: none); {tried}"
    return f"  build: {s['rows']} rows, {s['bytes']} bytes, {tried}, {s['retries']} retries, stages {s['stage_seconds']}"


@with_platform
def _status(args: argparse.Namespace, platform: Platform) -> int:
    rows = [s.to_document() for s in platform_status(platform)]
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for s in rows:
        print("\n".join(_resolution_lines(s)))
        if s["approval"]:
            a = s["approval"]
            print(f"  state {a['state']}" + (f", approved by {a['approved_by']}: {a['approval_reason']}" if a["approved_by"] else " (not approved)"))
        print("\n".join([_build_line(s), *_lag_line(s.get("lag"))]))
        for o in s.get("slo", ()):
            seen = _fmt(o["observed_seconds"]) if o["observed_seconds"] is not None else "no usable realization"
            over = f" (over: {', '.join(o['over'])})" if o.get("over") else ""
            print(f"  slo {o['objective']} <= {_fmt(o['bound_seconds'])}: {seen}, {'met' if o['met'] else 'MISSED'}{over}")
        for version, c in sorted(s["consumption"].items()):
            print(f"  reads of {version}: {c['reads']} by {len(c['readers'])} readers, failed {c['failed'] or 0}")
            print(_health_line(version, c))
        for q in s.get("quarantined", ()):
            held = q["quarantine"]
            why = f": quarantine #{held['id']} of {held['ref']} by {held['created_by']} ({held['state']}): {held['reason']}" if held else ""
            print(f"  QUARANTINED {q['ref']}{why}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("reproduce", help="audit: reproduce an artifact (seven steps), a realization or a model run from its manifest")
    p.add_argument(
        "target",
        metavar="ARTIFACT_OR_FOOTER_HASH",
        help="artifact name or footer hash (a unique prefix of >= 12 hex), dataset reference, realization manifest hash or model run-manifest hash",
    )
    p.add_argument("--no-rebuild", action="store_true", help="do not rebuild expired or corrupt inputs from raw landing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_reproduce)
    p = sub.add_parser("rehearse", help="dry reconstruction of retained models and artifacts (--full: in full); prints the fraction")
    p.add_argument("--period-days", type=int, default=1, help="rotating sample covering every retained output once per this many days (default 1: all)")
    p.add_argument("--full", action="store_true", help="the weekly rehearsal: reproduce retained models and artifacts in full (code, lock, rebuild, rerun)")
    p.add_argument("--period-weeks", type=int, default=1, help="with --full: every retained output once per this many weeks (default 1: all)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_rehearse)
    p = sub.add_parser("promote", help="move a model's training set to the production alias, behind the promotion gate")
    p.add_argument("run_hash", metavar="MODEL_RUN_HASH")
    p.add_argument("--alias", default="production")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_promote)
    p = sub.add_parser("status", help="freshness, publication lag, build health and consumption per dataset definition", epilog=STATUS_LEGEND)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_status)
