"""The fraud example's own Dagster assets (``platform.yaml`` ``dagster_modules``): the fraud model."""

import dagster as dg

from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.defs import keys
from dsv_platform.defs.datasets import REF, upstream_ref
from dsv_platform.defs.metadata import AssetResult, table
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.examples.fraud import model
from dsv_platform.services.reproduction.model_run import ModelRun, train_model

TRAINING_SET = keys.snapshot_of("fraud_training_set", "v6")
MODEL_NAME = "fraud_model"
SEED = 42


def model_result(run: ModelRun) -> AssetResult:
    return dg.MaterializeResult(
        data_version=dg.DataVersion(run.run_hash),
        metadata={
            REF: dg.MetadataValue.text(run.ref),
            "run_manifest_hash": dg.MetadataValue.text(run.run_hash),
            "run_manifest_object": dg.MetadataValue.text(run.run_object),
            "trained_on_manifest_hash": dg.MetadataValue.text(run.manifest_hash),
            "trained_on_content_hash": dg.MetadataValue.text(run.content_hash),
            "pinned_snapshots": table(["table", "snapshot id", "tag"], run.sources),
            "model_pins": table(["table", "snapshot id", "tag"], [(p.table, str(p.snapshot_id), p.tag) for p in run.pins]),
            "metrics": dg.MetadataValue.json(run.metrics),
            "retention_root_id": dg.MetadataValue.int(run.retention_root),
        },
    )


@dg.asset(
    key=keys.model(MODEL_NAME),
    group_name="models",
    kinds={"numpy"},
    deps=[TRAINING_SET, keys.splits_of("fraud_training_set", "v6")],
    description="Fraud model (numpy logistic regression, seed 42) trained on the train split of the realization the latest "
    "`datasets/fraud_training_set/v6` published, evaluated on its validation split. Data version = run manifest hash; "
    "the run manifest (realization ref and hash, code, environment, parameters, seed, metrics) is stored as an object "
    "and linked to the realization in the registry lineage; the model version is a retention root keeping that realization. "
    "Its source snapshots are tagged model-fraud_model-<hash12> (model_pins), kept while the model is retained.",
)
def fraud_model(context: dg.AssetExecutionContext, platform: PlatformResource) -> AssetResult:
    run = train_model(platform.get(), upstream_ref(context, TRAINING_SET), model_name=MODEL_NAME, trainer=model.TRAINER, seed=SEED)
    return model_result(run)


def definitions(config: PlatformConfig) -> dg.Definitions:
    """The fraud model asset (the platform's Definitions provide the ``platform`` resource)."""
    return dg.Definitions(assets=[fraud_model])
