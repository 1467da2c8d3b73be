"""Reproducibility on a schedule: the daily rehearsal (resolvable), the weekly full one (fully reproduced),
the integrity scan, and the platform's status figures."""

from typing import Any

import dagster as dg

from dsv_platform.defs import keys
from dsv_platform.defs.metadata import AssetResult, table
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.services.publication.status import platform_status
from dsv_platform.services.reproduction.rehearsal import RehearsalRun, full_rehearsal, integrity_scan, rehearse

RECONSTRUCTABLE = "retained_models_are_reconstructable"
INTEGRITY = "sampled_realizations_match_their_manifests"
FULLY_REPRODUCED = "sampled_retained_outputs_reproduce_in_full"


class RehearsalConfig(dg.Config):
    period_days: int = 1  # rotating sample: every retained model once per this many days (1: all, daily)


class FullRehearsalConfig(dg.Config):
    period_weeks: int = 4  # rotating sample: every retained model and artifact reproduced in full once per this many weeks


class IntegrityConfig(dg.Config):
    period_days: int = 7  # every readable realization re-hashed once per this many days


@dg.asset(
    group_name="reproducibility",
    check_specs=[
        dg.AssetCheckSpec(
            RECONSTRUCTABLE, asset="reconstructability", blocking=True, description="every rehearsed retained model and artifact was resolvable today"
        )
    ],
    description="The fraction of retained models and artifacts resolvable today: a dry reconstruction of each (resolve, verify "
    "object, content and split-assignment hashes, a training smoke test for a model; the manifest, code pin and re-hashed "
    "inputs for an artifact), one reproduction record each. The fraction over time is "
    "this asset's `reconstructable_fraction` metadata; failures name the typed reason (EXPIRED, REDACTED, CORRUPT, NOT_FOUND, "
    "HASH_MISMATCH, ENVIRONMENT_DRIFT, ...).",
)
def reconstructability(context: dg.AssetExecutionContext, config: RehearsalConfig, platform: PlatformResource) -> AssetResult:
    run = rehearse(platform.get(), period_days=config.period_days, actor=platform.get().actor)
    _observe(context, run)
    rows = [(r.run_hash, r.outcome.value, r.reason if not r.reconstructable else "", r.record_id) for r in run.reports]
    reasons = sorted({r.outcome.value for r in run.failures})
    return dg.MaterializeResult(
        metadata={
            "reconstructable_fraction": dg.MetadataValue.float(run.fraction),
            "rehearsed": dg.MetadataValue.int(len(run.reports)),
            "retained_models": dg.MetadataValue.int(run.retained),
            "last_records": table(["run manifest", "outcome", "reason", "record"], rows),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=RECONSTRUCTABLE,
                passed=not run.failures,
                description="all reconstructable" if not run.failures else f"not reconstructable: {', '.join(reasons)}",
                metadata={
                    "failures": table(["run manifest", "outcome", "reason"], [(r.run_hash, r.outcome.value, r.reason) for r in run.failures]),
                    "reasons": ", ".join(reasons) or "none",
                },
            )
        ],
    )


def _observe(context: dg.AssetExecutionContext, run: RehearsalRun) -> None:
    """One observation per rehearsed manifest on its own asset (the model or report), so it shows in that asset's history."""
    for r in run.reports:
        if r.asset_key:
            context.log_event(
                dg.AssetObservation(
                    keys.parse(r.asset_key),
                    description=f"{run.procedure}: {r.outcome.value}",
                    metadata={"outcome": r.outcome.value, "run_hash": r.run_hash or "", "reason": r.reason, "record_id": r.record_id},
                )
            )


@dg.asset(
    group_name="reproducibility",
    check_specs=[
        dg.AssetCheckSpec(
            FULLY_REPRODUCED, asset="full_reproducibility", blocking=True, description="every sampled retained model and artifact reproduced in full"
        )
    ],
    description="The fraction of a weekly rotating sample of retained models and artifacts that reproduce in full: the "
    "recorded commit checked out, the environment rebuilt from the recorded lock, expired inputs rebuilt from raw, the "
    "recorded parameters and seed rerun and the output compared at its stated precision. The fraction over time is this "
    "asset's `fully_reproduced_fraction` metadata, beside the daily `reconstructable_fraction` (resolvable) of "
    "`reconstructability`.",
)
def full_reproducibility(context: dg.AssetExecutionContext, config: FullRehearsalConfig, platform: PlatformResource) -> AssetResult:
    run = full_rehearsal(platform.get(), period_weeks=config.period_weeks, actor=platform.get().actor)
    _observe(context, run)
    rows = [(r.target, r.kind, r.outcome.value, "; ".join(r.rebuilt), r.reason if not r.reconstructable else "", r.record_id) for r in run.reports]
    reasons = sorted({r.outcome.value for r in run.failures})
    return dg.MaterializeResult(
        metadata={
            "fully_reproduced_fraction": dg.MetadataValue.float(run.fraction),
            "reproduced": dg.MetadataValue.int(len(run.reports)),
            "retained": dg.MetadataValue.int(run.retained),
            "rebuilt_from_raw": dg.MetadataValue.int(sum(bool(r.rebuilt) for r in run.reports)),
            "last_records": table(["manifest", "kind", "outcome", "rebuilt", "reason", "record"], rows),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=FULLY_REPRODUCED,
                passed=not run.failures,
                description="all reproduced in full" if not run.failures else f"not reproduced: {', '.join(reasons)}",
                metadata={"reasons": ", ".join(reasons) or "none"},
            )
        ],
    )


@dg.asset(
    group_name="reproducibility",
    check_specs=[dg.AssetCheckSpec(INTEGRITY, asset="realization_integrity", blocking=True, description="every sampled realization re-hashes to its manifest")],
    description="Integrity scan: a rotating sample of readable realizations re-hashed; a mismatch quarantines the realization "
    "('integrity: object <digest>') and names the object.",
)
def realization_integrity(config: IntegrityConfig, platform: PlatformResource) -> AssetResult:
    scan = integrity_scan(platform.get(), period_days=config.period_days)
    bad = scan.mismatches
    return dg.MaterializeResult(
        metadata={
            "scanned": dg.MetadataValue.int(len(scan.findings)),
            "population": dg.MetadataValue.int(scan.population),
            "mismatches": dg.MetadataValue.int(len(bad)),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=INTEGRITY,
                passed=not bad,
                description="all sampled realizations verified" if not bad else "; ".join(f"{f.outcome.value}: {f.ref} object {f.object}" for f in bad),
                metadata={
                    "mismatches": table(["ref", "outcome", "object", "quarantined"], [(f.ref, f.outcome.value, f.object, f.quarantined) for f in bad])
                },
            )
        ],
    )


SLOS_MET = "slos_met"


@dg.asset(
    group_name="reproducibility",
    description="Per dataset definition: usable freshness (age of the newest realization that passed every gate), publication lag "
    "(publication time minus watermark) and the lag from valid time split into arrival (upstream) and compute (our build), build "
    "health (rows, bytes, attempts, retries, gate failures, time per stage) and consumption health per version (consumers, reads, "
    "time to first byte, throughput, missing and corrupt objects; `consumption` table, totals plotted over time). The slos_met "
    "check fails when a definition misses a service level its YAML declares (slo:), naming the part of a lag that is over.",
    check_specs=[dg.AssetCheckSpec(SLOS_MET, asset="dataset_observability", description="every declared service level (slo:) is met")],
)
def dataset_observability(platform: PlatformResource) -> AssetResult:
    rows = [s.to_document() for s in platform_status(platform.get())]
    slos = [(s["ref"], o["objective"], o["bound_seconds"], o["observed_seconds"], o["met"], ", ".join(o.get("over", []))) for s in rows for o in s["slo"]]
    missed = [f"{ref} {objective}" + (f" (over: {over})" if over else "") for ref, objective, _, _, met, over in slos if not met]
    check = dg.AssetCheckResult(
        check_name=SLOS_MET,
        passed=not missed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"missed: {', '.join(missed)}" if missed else None,
        metadata={"objectives": table(["definition", "objective", "bound s", "observed s", "met", "over"], slos)},
    )
    lines = [
        (s["ref"], s["usable_ref"] or "none", s["freshness_seconds"], s["publication_lag_seconds"], *_lag_cells(s), s["rows"], s["bytes"],
         s["retries"], s["gate_failures"])
        for s in rows
    ]  # fmt: skip
    header = ["definition", "usable", "freshness s", "publication lag s", "event lag s", "arrival lag s", "compute lag s", "rows", "bytes", "retries"]
    return dg.MaterializeResult(
        metadata={
            "definitions": table([*header, "gate failures"], lines),
            **consumption_metadata(rows),
            "status": dg.MetadataValue.json(rows),
        },
        check_results=[check],
    )


def _lag_cells(status: dict[str, Any]) -> list[float | None]:
    lag = status.get("lag") or {}
    return [lag.get(k) for k in ("event_s", "arrival_s", "compute_s")]


def consumption_metadata(rows: list[dict[str, Any]]) -> dict[str, dg.MetadataValue]:
    """Per (definition, version) the health of its reads as a table, and platform totals the UI plots over materializations."""
    keys = ("consumers", "reads", "data_reads", "ttfb_p50_s", "ttfb_max_s", "bytes_per_s", "rows_per_s", "missing", "corrupt")
    per = [(s["ref"], version, *(c.get(k) for k in keys)) for s in rows for version, c in sorted(s["consumption"].items())]
    header = ["definition", "version", "consumers", "opens", "reads", "ttfb p50 s", "ttfb max s", "bytes/s", "rows/s", "missing", "corrupt"]
    ttfb = [c["ttfb_max_s"] for s in rows for c in s["consumption"].values() if c.get("ttfb_max_s") is not None]
    totals: dict[str, dg.MetadataValue] = {
        "consumption_reads": dg.MetadataValue.int(sum(int(c.get("data_reads") or 0) for s in rows for c in s["consumption"].values())),
        "consumption_missing_objects": dg.MetadataValue.int(sum(int(c.get("missing") or 0) for s in rows for c in s["consumption"].values())),
        "consumption_corrupt_objects": dg.MetadataValue.int(sum(int(c.get("corrupt") or 0) for s in rows for c in s["consumption"].values())),
    }
    if ttfb:
        totals["consumption_ttfb_max_s"] = dg.MetadataValue.float(max(ttfb))
    return {"consumption": table(header, per), **totals}


rehearsal_job = dg.define_asset_job("rehearsal_job", selection=[reconstructability], description="Dry reconstruction of retained models and artifacts.")
full_rehearsal_job = dg.define_asset_job(
    "full_rehearsal_job",
    selection=[full_reproducibility],
    description="Reproduce in full a rotating sample of retained models and artifacts (code, environment, rebuild, rerun, compare).",
)
integrity_scan_job = dg.define_asset_job(
    "integrity_scan_job",
    selection=[realization_integrity, dataset_observability],
    description="Re-hash a rotating sample of realizations; refresh the status figures.",
)
rehearsal_schedule = dg.ScheduleDefinition(
    name="rehearsal_schedule",
    job=rehearsal_job,
    cron_schedule="0 5 * * *",
    execution_timezone="UTC",
    description="Rehearse reconstruction of retained models daily.",
)
full_rehearsal_schedule = dg.ScheduleDefinition(
    name="full_rehearsal_schedule",
    job=full_rehearsal_job,
    cron_schedule="0 6 * * 0",
    execution_timezone="UTC",
    description="Reproduce in full a rotating sample of retained models and artifacts weekly (Sundays; every one once per 4 weeks).",
)
integrity_scan_schedule = dg.ScheduleDefinition(
    name="integrity_scan_schedule",
    job=integrity_scan_job,
    cron_schedule="30 5 * * *",
    execution_timezone="UTC",
    description="Integrity scan daily (full coverage every 7 days).",
)
