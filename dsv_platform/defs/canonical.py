"""canonical_<table>: Iceberg tables with valid and recorded time, loaded from the landed batches."""

import dagster as dg

from dsv_platform.services.canonical_load import load_partition
from dsv_platform.defs.metadata import failure_cases, md_table
from dsv_platform.defs.partitions import daily_partitions, partition_day
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.domain.sources import SOURCES, TableSpec

ROWS_SATISFY_CONTRACT = "rows_satisfy_contract"


def build_canonical_asset(spec: TableSpec) -> dg.AssetsDefinition:
    name = f"canonical_{spec.name}"

    @dg.asset(
        name=name,
        partitions_def=daily_partitions,
        group_name="canonical",
        kinds={"iceberg"},
        deps=[dg.AssetKey(f"raw_{spec.name}")],
        check_specs=[
            dg.AssetCheckSpec(
                ROWS_SATISFY_CONTRACT,
                asset=name,
                description=f"landed rows satisfy the Pandera contract {spec.contract_file}.yaml; failing rows are quarantined, the rest load",
            )
        ],
        description=f"{spec.contract.description or spec.name} Parsed, deduplicated and contract-checked; "
        f"valid time `{spec.valid_time}`, recorded time `_recorded_at`. Corrections and late events are new rows: "
        "read as known at T or as corrected now. Data version = content hash of the partition as corrected now.",
    )
    def _canonical(context: dg.AssetExecutionContext, platform: PlatformResource) -> dg.MaterializeResult:
        p = platform.get()
        load = load_partition(p.landing, p.tables, spec, partition_day(context))
        return dg.MaterializeResult(
            data_version=dg.DataVersion(load.digest.content_hash),
            metadata={
                "rows": dg.MetadataValue.int(load.rows),
                "content_hash": dg.MetadataValue.text(load.digest.content_hash),
                "schema_hash": dg.MetadataValue.text(load.digest.schema_hash),
                "snapshot_id": dg.MetadataValue.text(str(load.snapshot_id)),
                "rows_rejected": dg.MetadataValue.int(load.rejected_rows),
                "batches": md_table(
                    ["batch", "recorded_at", "appended", "unchanged", "rejected", "already applied"],
                    [(b.record.batch_id, b.record.recorded_at, b.outcome.appended, b.outcome.unchanged, b.rejected, b.outcome.already_applied) for b in load.batches],
                ),
                "quarantined_batches": md_table(["batch", "digest", "reason"], [(r.batch_id, r.digest, r.reason) for r in load.quarantined]),
            },
            check_results=[
                dg.AssetCheckResult(
                    check_name=ROWS_SATISFY_CONTRACT,
                    passed=not load.failures,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"failure_cases": failure_cases(load.failures), "rows_quarantined": dg.MetadataValue.int(load.rejected_rows)},
                )
            ],
        )

    return _canonical


canonical_assets = [build_canonical_asset(spec) for spec in SOURCES.values()]
