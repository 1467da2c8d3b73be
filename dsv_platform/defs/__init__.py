"""The thin Dagster layer: assets, checks, jobs, schedules, sensors and resources (no logic here)."""

from __future__ import annotations

import dagster as dg

from dsv_platform.core import sample_data
from dsv_platform.settings import Settings


def build_defs(settings: Settings, *, rows_per_day: int = sample_data.ROWS_PER_DAY, seed: int = 7) -> dg.Definitions:
    """The platform's Definitions over the stores ``settings`` names."""
    from dsv_platform.defs.automation import daily_ingest_job, daily_ingest_schedule, drop_folder_sensor, landing_job
    from dsv_platform.defs.canonical import canonical_assets
    from dsv_platform.defs.datasets import dataset_assets
    from dsv_platform.defs.gc import gc_plan_job, gc_plan_schedule
    from dsv_platform.defs.labels import labels_fraud
    from dsv_platform.defs.model import fraud_model
    from dsv_platform.defs.privacy import privacy_deletion_job
    from dsv_platform.defs.raw import raw_assets
    from dsv_platform.defs.rehearsal import dataset_observability, integrity_scan_job, integrity_scan_schedule, realization_integrity, reconstructability, rehearsal_job, rehearsal_schedule
    from dsv_platform.defs.resources import build_resources

    return dg.Definitions(
        assets=[*raw_assets, *canonical_assets, labels_fraud, *dataset_assets, fraud_model, reconstructability, realization_integrity, dataset_observability],
        jobs=[landing_job, daily_ingest_job, privacy_deletion_job, gc_plan_job, rehearsal_job, integrity_scan_job],
        schedules=[daily_ingest_schedule, gc_plan_schedule, rehearsal_schedule, integrity_scan_schedule],
        sensors=[drop_folder_sensor],
        resources=build_resources(settings, rows_per_day=rows_per_day, seed=seed),
    )
