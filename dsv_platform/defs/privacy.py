"""The privacy deletion job: erase one data subject on request (run it deliberately, one at a time)."""

import dagster as dg

from dsv_platform.defs.resources import PlatformResource
from dsv_platform.services.privacy.privacy import build_coordinator


class PrivacyDeletionConfig(dg.Config):
    subject: str
    reason: str
    dry_run: bool = False


@dg.op
def delete_subject(context: dg.OpExecutionContext, config: PrivacyDeletionConfig, platform: PlatformResource) -> dg.Output[int]:
    """Erase the subject from every realization and object built from it; affected realizations become REDACTED."""
    coordinator = build_coordinator(platform.get())
    report = coordinator.delete(config.subject, config.reason, apply=not config.dry_run)
    counts: dict[str, int] = {}
    for o in report.outcomes:
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    return dg.Output(
        report.generation,
        metadata={
            "request_id": report.request_id,
            "redaction_generation": report.generation,
            "applied": report.applied,
            "affected_realizations": len(report.plan.affected_realizations),
            "models_for_governance": dg.MetadataValue.json(report.models),
            "model_obligations": dg.MetadataValue.json(report.obligations),  # one per model run trained on a redacted realization
            **{f"outcome_{k}": n for k, n in sorted(counts.items())},
        },
    )


@dg.job(tags={"dagster/max_concurrent_runs": "1"})
def privacy_deletion_job() -> None:
    """Privacy deletion of one subject (config: subject, reason)."""
    delete_subject()
