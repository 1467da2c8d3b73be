"""raw_<source>: daily partitioned landing of source batches, write-once under content-derived keys."""

from pathlib import Path

import dagster as dg

from dsv_platform.adapters.landing import LandingStatus, read_drop_file
from dsv_platform.core.hashing import content_hash
from dsv_platform.defs.metadata import md_table
from dsv_platform.defs.partitions import daily_partitions, partition_day
from dsv_platform.defs.resources import PlatformResource, SampleSourceResource
from dsv_platform.domain.events import daily_batch
from dsv_platform.domain.sources import SOURCES, TableSpec

BATCH_IS_READABLE = "batch_is_readable"


class RawBatchConfig(dg.Config):
    """Which batches to land: files in the drop folder (by name), or, when empty, the source's daily batch."""

    drop_files: list[str] = []


def build_raw_asset(spec: TableSpec) -> dg.AssetsDefinition:
    name = f"raw_{spec.name}"

    @dg.asset(
        name=name,
        partitions_def=daily_partitions,
        group_name="raw",
        kinds={"csv"},
        check_specs=[dg.AssetCheckSpec(BATCH_IS_READABLE, asset=name, description="every landed batch parses as the source's format")],
        description=f"{spec.name} source batches as they arrived, one day per partition, stored write-once under their SHA-256. "
        "Landing the same bytes again is a no-op; new bytes for a batch id are a new object; unreadable batches are quarantined.",
    )
    def _raw(context: dg.AssetExecutionContext, config: RawBatchConfig, platform: PlatformResource, sample_source: SampleSourceResource) -> dg.MaterializeResult:
        day = partition_day(context)
        zone = platform.get().landing
        if config.drop_files:
            batches = [b for f in config.drop_files if (b := read_drop_file(Path(platform.drop_folder) / f)) is not None]
        else:
            batches = [daily_batch(sample_source.domain(), spec.name, day)]
        landed = [zone.land(b) for b in batches]
        every = zone.records(spec.name, day)
        quarantined = [r for r in landed if r.status is LandingStatus.QUARANTINED]
        version = content_hash((r.batch_ref, r.digest) for r in every if r.loadable)
        return dg.MaterializeResult(
            data_version=dg.DataVersion(version),
            metadata={
                "batches_landed_now": dg.MetadataValue.md(", ".join(f"`{r.batch_id}`: {r.status.value}" for r in landed) or "none"),
                "object_digests": md_table(["batch", "digest", "rows", "recorded_at", "status"], [(r.batch_id, r.digest, r.rows, r.recorded_at, r.status.value) for r in every]),
                "rows": dg.MetadataValue.int(sum(r.rows for r in every if r.loadable)),
                "partition_version": dg.MetadataValue.text(version),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=BATCH_IS_READABLE,
                    passed=not quarantined,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"quarantined": md_table(["batch", "digest", "reason"], [(r.batch_id, r.digest, r.reason) for r in quarantined])},
                )
            ],
        )

    return _raw


raw_assets = [build_raw_asset(spec) for spec in SOURCES.values()]
