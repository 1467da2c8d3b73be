"""The asset key paths (core/config/asset_keys.py): one per kind of asset, the flat key each had before, and a version
that cannot be a key component refused where it is configured."""

import pytest

from dsv_platform.core.config import asset_keys
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform_tests.core.config_support import DATASET, write_config

BEFORE_AND_AFTER = [
    (asset_keys.raw("transactions"), "raw_transactions", "raw/transactions"),
    (asset_keys.canonical("transactions"), "canonical_transactions", "canonical/transactions"),
    (asset_keys.head("transactions"), "canonical_transactions_head", "canonical/transactions/head"),
    (asset_keys.snapshot("fraud_training_set", "v6"), "fraud_training_set_v6_snapshot", "datasets/fraud_training_set/v6"),
    (asset_keys.splits("fraud_training_set", "v6"), "fraud_training_set_v6_splits", "datasets/fraud_training_set/v6/splits"),
    (asset_keys.label("fraud"), "labels_fraud", "labels/fraud"),
    (asset_keys.model("fraud_model"), "fraud_model", "models/fraud_model"),
    (asset_keys.artifact("quarterly_consumption_report"), "quarterly_consumption_report", "artifacts/quarterly_consumption_report"),
]


@pytest.mark.parametrize(("path", "legacy", "shown"), BEFORE_AND_AFTER)
def test_every_kind_of_key_has_its_path_and_the_flat_key_it_had(path, legacy, shown):
    assert asset_keys.user_string(path) == shown and asset_keys.legacy_name(path) == legacy
    assert asset_keys.op_name(path) == shown.replace("/", "__")


def test_a_path_that_is_no_platform_key_has_no_legacy_name():
    assert asset_keys.legacy_name(("reconstructability",)) is None and asset_keys.legacy_name(("datasets", "x")) is None


@pytest.mark.parametrize("version", ["v1.2", "2026-06", "v 1", ""])
def test_a_name_that_cannot_be_a_key_component_is_a_config_error_naming_it(version):
    with pytest.raises(ConfigError, match=r"version .* cannot be part of a Dagster asset key") as err:
        asset_keys.snapshot("meter_readings", version)
    assert err.value.key == "version"
    assert asset_keys.user_string_of(asset_keys.snapshot, "meter_readings", version) is None  # a service: no asset to observe


def test_a_dataset_version_with_a_dot_is_refused_naming_its_file(tmp_path):
    text = DATASET.replace("version: v1", "version: v1.2")
    assert text != DATASET
    folder = write_config(tmp_path, {"datasets/meter_readings_v1.2.yaml": text})
    (folder / "datasets" / "meter_readings_v1.yaml").unlink()
    with pytest.raises(ConfigError, match=r"meter_readings_v1\.2\.yaml") as err:
        load_config(folder)
    assert err.value.key == "version" and "letters, digits and underscores" in str(err.value)
