"""The demo's last step: one run of ``rehearsal_job`` (daily: resolve and re-hash) and of ``full_rehearsal_job`` (weekly:
code worktree, environment from the lock, rebuild, rerun, compare) on the demo's Dagster instance.

Each run adds a point to ``reconstructable_fraction`` / ``fully_reproduced_fraction``, the two time series ``make ui``
plots; the demo runs each once so neither plot is empty. Its blocking check may fail (say NOT_REPRODUCIBLE_DIRTY from a dirty
working tree): the materialization and the check result are recorded either way and the demo reports them.
"""

from __future__ import annotations

from dsv_platform.cli.runs import Runner, asset_metadata

REHEARSALS = (  # job, asset, metadata key, what it checks
    ("rehearsal_job", "reconstructability", "reconstructable_fraction", "resolvable and re-hashed"),
    ("full_rehearsal_job", "full_reproducibility", "fully_reproduced_fraction", "fully reproduced"),
)
# A failed blocking check fails the step: reported below in one line per check, not as a logged stack trace.
SILENT = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def rehearse_once(runner: Runner) -> float | None:
    """Run each rehearsal job once, as its schedule would; print the fractions and return the daily one."""
    daily: float | None = None
    for job_name, asset, key, what in REHEARSALS:
        # The weekly job over every retained output (period 1 week), so the demo's one model is in its sample.
        config = {**SILENT, "ops": {asset: {"config": {"period_weeks": 1}}}} if job_name == "full_rehearsal_job" else SILENT
        result = runner.defs.resolve_job_def(job_name).execute_in_process(instance=runner.instance, run_config=config, raise_on_error=False)
        fraction = asset_metadata(result, asset).get(key)
        shown = "not recorded" if fraction is None else f"{fraction:.2f}"
        print(f"\nrehearsal ({job_name}): {key} {shown} ({what}; one more point of the time series in the UI)")
        for c in result.get_asset_check_evaluations():
            print(f"  {c.asset_key.to_user_string()}.{c.check_name}: {'passed' if c.passed else 'FAILED'} ({c.description})")
        if job_name == "rehearsal_job" and fraction is not None:
            daily = float(fraction)
    return daily
