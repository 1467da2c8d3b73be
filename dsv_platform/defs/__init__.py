"""The thin Dagster layer: assets, checks, jobs, schedules, sensors and resources (no logic here)."""

from __future__ import annotations

import dagster as dg

from dsv_platform.core import sample_data
from dsv_platform.settings import Settings


def build_defs(settings: Settings, *, rows_per_day: int = sample_data.ROWS_PER_DAY, seed: int = 7) -> dg.Definitions:
    """The platform's Definitions over the stores ``settings`` names."""
    from dsv_platform.defs.automation import daily_ingest_job, daily_ingest_schedule, drop_folder_sensor, landing_job
    from dsv_platform.defs.canonical import canonical_assets
    from dsv_platform.defs.labels import labels_fraud
    from dsv_platform.defs.raw import raw_assets
    from dsv_platform.defs.resources import build_resources

    return dg.Definitions(
        assets=[*raw_assets, *canonical_assets, labels_fraud],
        jobs=[landing_job, daily_ingest_job],
        schedules=[daily_ingest_schedule],
        sensors=[drop_folder_sensor],
        resources=build_resources(settings, rows_per_day=rows_per_day, seed=seed),
    )
