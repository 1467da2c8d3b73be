import datetime as dt
from pathlib import Path

import pytest

from dsv_platform.core.config.dataset_definition import load_definition, load_definitions, parse_definition
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform_tests.core.config_support import DATASET, write_config

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_datasets"  # the definitions as registered before base/as_of_joins


def test_fraud_definitions_keep_the_properties_callers_use():
    config = load_config(CONFIG_DIR)
    v5, v6 = config.datasets
    assert [d.ref for d in load_definitions()] == [v5.ref, v6.ref] == ["fraud_training_set:v5", "fraud_training_set:v6"]
    assert v6.sources == ("transactions", "account_features") and v6.base == "transactions"
    assert (v6.label_name, v6.label_version, v5.label_version) == ("fraud", 6, 5)
    assert v6.features == ("txn_count_7d", "amount_sum_7d", "card_present_ratio_7d")
    (join,) = v6.as_of_joins
    assert (join.source, join.on, join.time, join.lag, join.max_age) == (
        "account_features",
        ("account_id",),
        "event_date",
        dt.timedelta(days=1),
        dt.timedelta(0),
    )
    assert v6.entity_column == "account_id" and v6.asset_prefix == "fraud_training_set_v6"
    assert v6.population_filter is not None and v6.population_filter.to_text() == "currency in [USD, EUR, GBP, CAD]"
    assert (v6.gates.rows_at_least, v6.gates.label_coverage_at_least_bp, v6.gates.proportion_tolerance_bp) == (100, 9000, 1500)
    assert "contract" not in v6.recipe() and v6.recipe_hash != v5.recipe_hash and v6.policy().names


def test_the_contract_and_policy_are_unchanged_from_the_legacy_files():
    for version in ("v5", "v6"):
        old, new = (
            load_definition(LEGACY / f"fraud_training_set_{version}.yaml"),
            load_definition(CONFIG_DIR / "datasets" / f"fraud_training_set_{version}.yaml"),
        )
        assert old.contract == new.contract and old.split_policy == new.split_policy and old.sources == new.sources
        assert old.legacy_sources == ("transactions", "account_features") and old.base == "transactions"


def test_a_legacy_recipe_from_the_registry_parses_with_its_hash():
    old = load_definition(LEGACY / "fraud_training_set_v6.yaml")
    again = parse_definition({**old.recipe(), "contract": old.contract.to_document()}, source="registry fraud_training_set:v6")
    assert again.recipe_hash == old.recipe_hash


def test_an_unlike_dataset_without_label(tmp_path):
    (d,) = load_config(write_config(tmp_path)).datasets
    assert d.label is None and d.label_name is None and d.label_version is None and d.population_filter is None
    assert d.gates.label_coverage_at_least_bp == 0 and d.gates.proportion_tolerance_bp == 1000
    assert d.sources == ("meters", "calibration") and d.features == () and d.entity_column == "meter_id"


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("base: meters", "base: meterz", "base"),
        ("base: meters", "base: meters\nsources: [meters]", "sources"),
        ("source: calibration,", "source: calibrations,", "as_of_joins[0].source"),
        ("on: [meter_id]", "on: [site]", "as_of_joins[0].on"),
        ("on: [meter_id]", "on: []", "as_of_joins[0].on"),
        ("time: read_at", "time: kwh", "as_of_joins[0].time"),
        ("lag: 0d", "lag: 1 day", "as_of_joins[0].lag"),
        ("lag: 0d", "lag: 0d, within: 1d", "as_of_joins[0].within"),
        ("{source: calibration, on: [meter_id], time: read_at, lag: 0d}", "{on: [meter_id], time: read_at}", "as_of_joins[0].source"),
        ("column: read_at, start", "column: kwh, start", "observation_window.column"),
        ('start: "2026-01-01"', 'start: "2026-13-01"', "observation_window.start"),
        ('end: "2026-01-31"', 'end: "2025-01-31"', "observation_window.end"),
        ("gates: {rows_at_least: 1}", "gates: {rows_at_least: 1, label_coverage_at_least_bp: 9000}", "gates.label_coverage_at_least_bp"),
        ("gates: {rows_at_least: 1}", "gates: {proportion_tolerance_bp: 100}", "gates.rows_at_least"),
        ("gates: {rows_at_least: 1}", "gates: {rows_at_least: many}", "gates.rows_at_least"),
        ("seed: 1", "seed: one", "seed"),
        ("seed: 1", "", "seed"),
        ("seed: 1", "seed: 1\nlabel: {name: fraud, version: 6}\n", "gates.label_coverage_at_least_bp"),
        ("seed: 1", "seed: 1\nlabel: {name: fraud}\n", "label.version"),
        ("seed: 1", "seed: 1\nfeatures: [kwh]\n", "features"),
        ("seed: 1", "seed: 1\nfeatures: [voltage]\n", "features"),
        ("seed: 1", "seed: 1\npopulation_filter: {column: region, in: [north]}\n", "population_filter.column"),
        ("watermark: {rule: latest_recorded}", "watermark: {rule: newest}", "watermark.rule"),
        ("watermark: {rule: latest_recorded}", "watermark: {rule: fixed}", "watermark.at"),
        ("group_column: meter_id", "group_column: site", "split_policy.group_column"),
        ('bounds: "train=80,test=100"', 'bounds: "train=80,test=90"', "split_policy.bounds"),
        ("    - {name: factor, type: float64, scale: 4, nullable: true}", "    - {name: voltage, type: float64, scale: 4, nullable: true}", "contract.columns"),
        ("    - {name: factor, type: float64, scale: 4, nullable: true}", "    - {name: factor, type: float128}", "contract.columns.factor"),
        ("owner: grid", "owner: grid\nowner: ops", "owner"),
        ("seed: 1", "seed: 1\nsplits: 3", "splits"),
    ],
)
def test_a_wrong_definition_is_a_one_line_error_naming_file_and_key(tmp_path, old, new, key):
    assert old in DATASET
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, {"datasets/meter_readings_v1.yaml": DATASET.replace(old, new)}))
    text = str(info.value)
    assert "\n" not in text and "meter_readings_v1.yaml" in text and f"key {key!r}" in text, text


def test_an_as_of_join_column_the_joined_source_lacks(tmp_path):
    dataset = DATASET.replace("on: [meter_id]", "on: [meter_id, read_day]")
    with pytest.raises(ConfigError, match=r"meter_readings_v1.yaml: key 'as_of_joins\[0\].on': 'read_day' is not a column of source 'calibration'"):
        load_config(write_config(tmp_path, {"datasets/meter_readings_v1.yaml": dataset}))


def test_an_unknown_label_version(tmp_path):
    text = (CONFIG_DIR / "datasets" / "fraud_training_set_v6.yaml").read_text().replace("version: 6}", "version: 7}")
    folder = tmp_path / "config"
    for sub in ("sources", "labels"):
        (folder / sub).mkdir(parents=True)
        for f in (CONFIG_DIR / sub).glob("*.yaml"):
            (folder / sub / f.name).write_text(f.read_text())
    (folder / "datasets").mkdir()
    (folder / "datasets" / "fraud_training_set_v6.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"key 'label\.version': label 'fraud' has no version 7"):
        load_config(folder)
    assert load_config(folder, import_labels=False).label_modules == ("dsv_platform.examples.fraud.labels",)
    (folder / "labels" / "fraud.yaml").write_text((CONFIG_DIR / "labels" / "fraud.yaml").read_text().replace("examples.fraud.labels", "examples.fraud.nowhere"))
    with pytest.raises(ConfigError, match=r"fraud\.yaml: key 'module': cannot import"):
        load_config(folder)
