"""labels_fraud: one label version per label definition, keyed by transaction id, append-only."""

import dagster as dg

from dsv_platform.services.canonical_load import build_labels, label_spec
from dsv_platform.defs.partitions import label_version_partitions
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.domain.labels import LABEL_DEFINITIONS, label_definition

_DEFINITIONS = "; ".join(f"v{d.version}: {d.description}" for d in LABEL_DEFINITIONS.values())


@dg.asset(
    partitions_def=label_version_partitions,
    group_name="labels",
    kinds={"iceberg"},
    deps=[
        dg.AssetDep("canonical_transactions", partition_mapping=dg.AllPartitionMapping()),
        dg.AssetDep("canonical_chargebacks", partition_mapping=dg.AllPartitionMapping()),
    ],
    description=f"Fraud labels by transaction id, one partition (and Iceberg table) per label definition ({_DEFINITIONS}). "
    "A new definition is applied to all history as a new version; a label that changes is a new row, never a rewrite.",
)
def labels_fraud(context: dg.AssetExecutionContext, platform: PlatformResource) -> dg.MaterializeResult:
    definition = label_definition(int(context.partition_key.removeprefix("v")))
    tables = platform.get().tables
    build = build_labels(tables, definition)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(build.digest.content_hash),
        metadata={
            "label": dg.MetadataValue.text(definition.ref),
            "table": dg.MetadataValue.text(tables.identifier(label_spec(definition))),
            "rows": dg.MetadataValue.int(build.rows),
            "positives": dg.MetadataValue.int(build.positives),
            "labels_changed": dg.MetadataValue.int(build.outcome.appended if build.outcome else 0),
            "watermark": dg.MetadataValue.text(build.watermark.isoformat() if build.watermark else "no input yet"),
            "content_hash": dg.MetadataValue.text(build.digest.content_hash),
            "snapshot_id": dg.MetadataValue.text(str(tables.current_snapshot_id(label_spec(definition)))),
        },
    )
