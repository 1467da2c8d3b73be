"""The readings example's own Dagster asset (``platform.yaml`` ``dagster_modules``): the quarterly consumption report."""

import base64

import dagster as dg

from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.defs import keys
from dsv_platform.defs.datasets import REF, upstream_ref
from dsv_platform.defs.metadata import AssetResult, table
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.examples.readings.quarterly import produce_report
from dsv_platform.services.reproduction.artifacts import ArtifactRun

READINGS = keys.snapshot_of("readings_hourly", "v1")


def report_result(run: ArtifactRun) -> AssetResult:
    results = run.results
    rows = [(f"total kWh {region}", value) for region, value in results["total_kwh_by_region"].items()]
    rows += [(name, value) for name, value in results.items() if name != "total_kwh_by_region"]
    png = base64.b64encode(run.rendered["figure.png"]).decode()
    return dg.MaterializeResult(
        data_version=dg.DataVersion(run.manifest_hash),
        metadata={
            REF: dg.MetadataValue.text(run.manifest["inputs"][0]["ref"]),
            "manifest_hash": dg.MetadataValue.text(run.manifest_hash),
            "footer": dg.MetadataValue.text(run.record.footer),
            "results": table(["result", "value"], rows),
            "files": table(["file", "object"], sorted(run.record.files.items())),
            "figure": dg.MetadataValue.md(f"![hourly load and regional totals](data:image/png;base64,{png})"),
            "watermark": dg.MetadataValue.text(str(run.manifest["watermark"])),
            "retention_root_id": dg.MetadataValue.int(run.retention_root),
        },
    )


@dg.asset(
    key=keys.artifact("quarterly_consumption_report"),
    group_name="reports",
    kinds={"html", "png"},
    deps=[READINGS],
    description="Q1 2026 consumption: total kWh per region and the p99 hourly load (nearest rank, exact decimals) of the realization "
    "the latest `datasets/readings_hourly/v1` published, with a figure (PNG) and an HTML page. Every file prints the footer "
    "`manifest sha256:<hash>`; `dsv reproduce <hash>` reruns it from that manifest. Data version = the manifest hash.",
)
def quarterly_consumption_report(context: dg.AssetExecutionContext, platform: PlatformResource) -> AssetResult:
    return report_result(produce_report(platform.get(), upstream_ref(context, READINGS)))


def definitions(config: PlatformConfig) -> dg.Definitions:
    """The report asset (the platform's Definitions provide the ``platform`` resource)."""
    return dg.Definitions(assets=[quarterly_consumption_report])
