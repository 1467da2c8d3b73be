import dataclasses

import pytest

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform_tests.core.config_support import CALIBRATION, DATASET, METERS, write_config


def test_fraud_example_sources_match_the_python_constants():
    config = load_config(CONFIG_DIR)
    assert set(config.sources) == set(SOURCES)
    for name, old in SOURCES.items():
        new = config.sources[name]
        assert (new.name, new.valid_time, dict(new.aliases), new.partition_by, new.contract_file) == (
            old.name,
            old.valid_time,
            dict(old.aliases),
            old.partition_by,
            old.contract_file,
        )
        assert new.contract == old.contract and new.contract.schema_hash == old.contract.schema_hash
        assert new.entity == "account_id" and new.landing_format == "csv"
    assert config.label_modules == ("dsv_platform.examples.fraud.labels",)
    assert sorted(config.labels["fraud"]) == [5, 6] and config.label("fraud", 6).table_name == "labels_fraud_v6"


def test_an_unlike_source_loads(tmp_path):
    config = load_config(write_config(tmp_path))
    meters = config.sources["meters"]
    assert (meters.landing_format, meters.valid_time, meters.entity, meters.partition_by) == ("parquet", "read_at", "meter_id", "read_day")
    assert dict(meters.aliases) == {"kwh_total": "kwh"} and config.labels == {} and config.label_modules == ()
    assert hash(meters) == hash(dataclasses.replace(meters))


def _one_line_error(tmp_path, files, file, key):
    with pytest.raises(ConfigError) as info:
        load_config(write_config(tmp_path, files))
    text = str(info.value)
    assert "\n" not in text and info.value.exit_code == 2
    assert file in text and (key is None or f"key {key!r}" in text), text
    return text


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda t: t + "color: blue\n", "color"),
        (lambda t: t.replace("valid_time: read_at\n", ""), "valid_time"),
        (lambda t: t.replace("landing: {format: parquet}\n", ""), "landing"),
        (lambda t: t.replace("format: parquet", "format: xml"), "landing.format"),
        (lambda t: t.replace("format: parquet", "format: parquet, level: 3"), "landing.level"),
        (lambda t: t.replace("valid_time: read_at", "valid_time: read_time"), "valid_time"),
        (lambda t: t.replace("valid_time: read_at", "valid_time: kwh"), "valid_time"),
        (lambda t: t.replace("entity: meter_id", "entity: meter"), "entity"),
        (lambda t: t.replace("{kwh_total: kwh}", "{kwh_total: kwh2}"), "aliases.kwh_total"),
        (lambda t: t.replace("{kwh_total: kwh}", "{site: kwh}"), "aliases.site"),
        (lambda t: t.replace("partition_by: read_day\n", "partition_by: read_dya\n"), "columns.read_dya"),  # without one: a reference table
        (lambda t: t.replace("type: decimal, precision: 12, scale: 3", "type: money"), "columns.kwh"),
        (lambda t: t.replace("name: meters", "name: meter"), "name"),
        (lambda t: t.replace("entity: meter_id", "entity: meter_id\nentity: site"), "entity"),
    ],
)
def test_a_wrong_source_is_a_one_line_error_naming_file_and_key(tmp_path, change, key):
    text = _one_line_error(tmp_path, {"sources/meters.yaml": change(METERS)}, "meters.yaml", key)
    if "entity: site" in change(METERS):
        assert "duplicate key 'entity' on line" in text


def test_bad_file_names_and_bytes(tmp_path):
    _one_line_error(tmp_path / "a", {"sources/Meters.yaml": METERS}, "Meters.yaml", "name")
    _one_line_error(tmp_path / "b", {"sources/calibration.yml": CALIBRATION}, "calibration.yml", None)
    text = _one_line_error(tmp_path / "c", {"sources/meters.yaml": METERS.encode() + b"# \xff\xfe\n"}, "meters.yaml", None)
    assert "not UTF-8" in text
    _one_line_error(tmp_path / "d", {"sources/meters.yaml": "name: [unclosed\n"}, "meters.yaml", None)
    _one_line_error(tmp_path / "e", {"datasets/meter_readings.yaml": DATASET}, "meter_readings.yaml", "version")
    _one_line_error(tmp_path / "g", {"datasets/readings.yaml": DATASET}, "readings.yaml", "name")
    _one_line_error(tmp_path / "f", {"datasets/meter_readings_v2.yaml": DATASET}, "meter_readings_v2.yaml", "version")


def test_a_source_spec_checks_itself():
    config_spec = SOURCES["transactions"]
    with pytest.raises(ConfigError, match="valid_time"):
        SourceSpec("transactions", config_spec.contract, valid_time="amount")
    spec = SourceSpec("transactions", config_spec.contract, valid_time="created_at", aliases={"merchant_risk_score": "merchant_risk"})
    assert spec.contract_file == "transactions" and spec.partition_by == "event_date"


def test_type_errors_read_as_english(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 23 item 9: 'must be a int' read badly; the kind is named in words."""
    from dsv_platform.core.config_yaml import ConfigError, need

    for value, kind, words in ((3, str, "must be a string"), ("x", int, "must be an integer"), ("x", (int, float), "must be an integer or a number")):
        try:
            need({"k": value}, "k", kind, file=tmp_path / "f.yaml")
        except ConfigError as exc:
            assert words in str(exc), exc
        else:
            raise AssertionError("accepted")
