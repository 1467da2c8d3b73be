"""The demo's last step: one run of ``rehearsal_job`` (the ``reconstructability`` asset) on the demo's Dagster instance.

Each run adds a point to the asset's ``reconstructable_fraction`` metadata, the time series ``make ui`` plots; the
demo runs it once so the plot is never empty. Its blocking check may fail (say NOT_REPRODUCIBLE_DIRTY from a dirty
working tree): the materialization and the check result are recorded either way and the demo reports them.
"""

from __future__ import annotations

from dsv_platform.cli.runs import Runner, asset_metadata

REHEARSAL_JOB = "rehearsal_job"
REHEARSAL_ASSET = "reconstructability"
# A failed blocking check fails the step: reported below in one line per check, not as a logged stack trace.
SILENT = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def rehearse_once(runner: Runner) -> float | None:
    """Run ``rehearsal_job`` once, as the daily schedule would; print and return the fraction it recorded."""
    job = runner.defs.resolve_job_def(REHEARSAL_JOB)
    result = job.execute_in_process(instance=runner.instance, run_config=SILENT, raise_on_error=False)
    fraction = asset_metadata(result, REHEARSAL_ASSET).get("reconstructable_fraction")
    shown = "not recorded" if fraction is None else f"{fraction:.2f}"
    print(f"\nrehearsal ({REHEARSAL_JOB}): reconstructable_fraction {shown} (one more point of the time series in the UI)")
    for c in result.get_asset_check_evaluations():
        print(f"  {c.asset_key.to_user_string()}.{c.check_name}: {'passed' if c.passed else 'FAILED'} ({c.description})")
    return None if fraction is None else float(fraction)
