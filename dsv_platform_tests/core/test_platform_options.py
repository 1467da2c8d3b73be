import datetime as dt

import pytest

from dsv_platform.core.config.model_governance import FamilyPolicy, ModelGovernance, ModelPolicy
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.platform_options import DEFAULT_PARTITIONS_START, PlatformOptions
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform_tests.core.config_support import write_config


def test_the_fraud_example_sets_its_partitions_module_and_demo():
    options = load_config(CONFIG_DIR, import_labels=False).options
    governance = ModelGovernance(families={"fraud_model": FamilyPolicy(ModelPolicy.RETRAIN_REQUIRED)})  # the demo's deletion story
    expected = PlatformOptions(dt.date(2026, 6, 1), ("dsv_platform.examples.fraud.defs",), "dsv_platform.examples.fraud.demo", model_governance=governance)
    assert options == expected


def test_without_platform_yaml_the_defaults_apply(tmp_path):
    options = load_config(write_config(tmp_path)).options
    assert options == PlatformOptions() and options.partitions_start == DEFAULT_PARTITIONS_START == dt.date(2020, 1, 1)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("colour: blue\n", "colour"),
        ("partitions: {start: 2026-13-01}\n", None),  # not a date: a YAML error naming the file
        ('partitions: {start: "June"}\n', "partitions.start"),
        ("partitions: {begin: 2026-01-01}\n", "partitions.begin"),
        ("partitions: {}\n", "partitions.start"),
        ("dagster_modules: my.defs\n", "dagster_modules"),
        ("dagster_modules: [my.defs, 'not a module']\n", "dagster_modules[1]"),
        ("dagster_modules: [a.b, a.b]\n", "dagster_modules"),
        ("demo: [x]\n", "demo"),
        ("- a list\n", None),
    ],
)
def test_a_wrong_platform_yaml_is_a_one_line_error_naming_file_and_key(tmp_path, text, key):
    root = write_config(tmp_path, {"platform.yaml": text})
    with pytest.raises(ConfigError) as err:
        load_config(root)
    message = str(err.value)
    assert "platform.yaml" in message and "\n" not in message
    if key is not None:
        assert key in message


def test_unquoted_and_quoted_dates_both_parse(tmp_path):
    for text in ("partitions: {start: 2026-01-02}\n", 'partitions: {start: "2026-01-02"}\n'):
        assert load_config(write_config(tmp_path / text[-8:-3], {"platform.yaml": text})).options.partitions_start == dt.date(2026, 1, 2)
