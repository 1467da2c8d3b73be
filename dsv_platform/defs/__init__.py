"""The thin Dagster layer, built from the configuration folder: assets, checks, jobs, schedules, sensors, resources.

``build_defs(settings)`` reads ``settings.config_dir`` (no Python needed for a new
source or dataset): ``raw/<source>``, ``canonical/<source>`` and its observed
``canonical/<source>/head`` per source, ``labels/<name>`` per registered label,
``datasets/<name>/<version>`` and ``datasets/<name>/<version>/splits`` per dataset
file (the keys: defs/keys.py), plus the ``definitions(config)`` of every module
``platform.yaml`` lists under ``dagster_modules``.
"""

from __future__ import annotations

import dagster as dg

from dsv_platform.core.config.platform_config import PlatformConfig, load_config
from dsv_platform.settings import Settings


def config_assets(config: PlatformConfig) -> list[dg.AssetsDefinition]:
    """The assets the configuration describes (sources with their observed heads, labels, datasets)."""
    from dsv_platform.defs.canonical import build_canonical_asset, build_head_asset
    from dsv_platform.defs.datasets import build_dataset_assets
    from dsv_platform.defs.labels import build_label_asset
    from dsv_platform.defs.options import partitions_start
    from dsv_platform.defs.partitions import daily_partitions
    from dsv_platform.defs.raw import build_raw_asset

    daily = daily_partitions(partitions_start(config))
    parts = {name: daily if spec.partitioned else None for name, spec in config.sources.items()}  # a reference table: unpartitioned assets
    assets = [
        a for spec in config.sources.values() for a in (build_raw_asset(spec, parts[spec.name]), build_canonical_asset(spec, parts[spec.name]))
    ]
    assets += [build_head_asset(spec) for spec in config.sources.values()]
    assets += [build_label_asset(name, versions) for name, versions in sorted(config.labels.items())]
    assets += [a for d in config.datasets for a in build_dataset_assets(d)]
    return assets


def build_defs(settings: Settings, config: PlatformConfig | None = None) -> dg.Definitions:
    """The platform's Definitions over the stores ``settings`` names and the configuration in ``settings.config_dir``."""
    from dsv_platform.defs.automation import build_automation
    from dsv_platform.defs.datasets import build_publication_job
    from dsv_platform.defs.executor import build_executor
    from dsv_platform.defs.gc import gc_plan_job, gc_plan_schedule
    from dsv_platform.defs.options import extra_definitions, partitions_start
    from dsv_platform.defs.partitions import daily_partitions
    from dsv_platform.defs.privacy import privacy_deletion_job
    from dsv_platform.defs.rehearsal import (
        dataset_observability,
        full_rehearsal_job,
        full_rehearsal_schedule,
        full_reproducibility,
        integrity_scan_job,
        integrity_scan_schedule,
        realization_integrity,
        reconstructability,
        rehearsal_job,
        rehearsal_schedule,
    )
    from dsv_platform.defs.resources import build_resources

    config = config if config is not None else load_config(settings.config_dir)
    auto = build_automation(config.sources, daily_partitions(partitions_start(config)))
    platform_defs = dg.Definitions(
        assets=[*config_assets(config), reconstructability, full_reproducibility, realization_integrity, dataset_observability],
        jobs=[
            *auto.jobs,
            *map(build_publication_job, config.datasets),
            *(privacy_deletion_job, gc_plan_job, rehearsal_job, full_rehearsal_job, integrity_scan_job),
        ],
        schedules=[*auto.schedules, gc_plan_schedule, rehearsal_schedule, full_rehearsal_schedule, integrity_scan_schedule],
        sensors=auto.sensors,
        resources=build_resources(settings),
        executor=build_executor(config),
    )
    return dg.Definitions.merge(platform_defs, *extra_definitions(config))
