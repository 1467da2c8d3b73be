"""labels_<name>: one partition (and Iceberg table) per registered label version, append-only."""

from typing import Any

import dagster as dg

from dsv_platform.core.config.labels import LabelVersion
from dsv_platform.defs import keys
from dsv_platform.defs.catalog import code_version, module_source_hash, owners, schema_metadata, table_metadata
from dsv_platform.defs.metadata import AssetResult
from dsv_platform.defs.partitions import label_version_partitions
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import STEP_RETRY, retried_if_transient
from dsv_platform.services.ingest.label_build import LabelBuild, build_labels, label_table_spec


def label_result(label: LabelVersion, build: LabelBuild, table_name: str = "") -> AssetResult:
    outcome, mark = build.outcome, build.watermark
    metadata: dict[str, dg.MetadataValue[Any]] = {
        "label": dg.MetadataValue.text(label.ref),
        "table": dg.MetadataValue.text(label.table_name),
        "rows": dg.MetadataValue.int(build.rows),
        **(table_metadata(table_name, build.rows) if table_name else {}),
        "labels_changed": dg.MetadataValue.int(outcome.appended if outcome else 0),
        "watermark": dg.MetadataValue.text(mark.isoformat() if mark else "no input yet"),
        "content_hash": dg.MetadataValue.text(build.digest.content_hash),
    }
    return dg.MaterializeResult(data_version=dg.DataVersion(build.digest.content_hash), metadata=metadata)


def build_label_asset(name: str, versions: dict[int, LabelVersion]) -> dg.AssetsDefinition:
    inputs = sorted({s for v in versions.values() for s in v.inputs})
    contract = versions[max(versions)].contract  # the label file's contract: every version's
    described = "; ".join(f"v{v.version}: {v.description}" for _, v in sorted(versions.items()))

    @dg.asset(
        key=keys.label(name),
        partitions_def=label_version_partitions(versions),
        group_name="labels",
        owners=owners(contract.owner),
        metadata=schema_metadata(contract),
        code_version=code_version(*sorted({module_source_hash(v.module) or v.module for v in versions.values()}), contract.schema_hash),
        retry_policy=STEP_RETRY,
        kinds={"iceberg"},
        deps=[*(dg.AssetDep(keys.canonical(s), partition_mapping=dg.AllPartitionMapping()) for s in inputs), *(dg.AssetDep(keys.head(s)) for s in inputs)],
        description=f"Label {name}, one partition (and Iceberg table) per registered version ({described}). "
        "A new version is applied to all history; a label that changes is a new row, never a rewrite.",
    )
    def _labels(context: dg.AssetExecutionContext, platform: PlatformResource) -> AssetResult:
        with retried_if_transient():
            label = versions[int(context.partition_key.removeprefix("v"))]
            p = platform.get()
            return label_result(label, build_labels(p, label), p.tables.identifier(label_table_spec(label)))

    return _labels
