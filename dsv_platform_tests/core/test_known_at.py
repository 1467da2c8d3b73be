"""``as_known_at: example_time`` (issue 27 item 2): a joined feature as it was known at the example's own time."""

import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pytest

from dsv_platform.core.assembly.assembly import AssemblyError, as_of_join, assemble_examples
from dsv_platform.core.config.dataset_definition import AsOfJoin, load_definition
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform_tests.core.config_support import DATASET, write_config
from dsv_platform_tests.core.known_at_support import keyed_spec, latest, oracle, readings, ts, versions

JOIN = AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(0))
KNOWN = replace(JOIN, known_at="example_time")
KNOWN_LINE = "  - {source: calibration, on: [meter_id], time: read_at, lag: 0d, as_known_at: example_time}"
PLAIN_LINE = "  - {source: calibration, on: [meter_id], time: read_at, lag: 0d}"
# recipe hashes of definitions without the option, as every earlier release computed them
FROZEN = {"meter_readings:v1": "e15c60401355b47f", "fraud_training_set:v6": "faa47055ad2c5267"}


def _factors(reads, table, join, spec):
    return as_of_join(reads, table, join, spec, ["factor"]).column("factor").to_pylist()


def test_a_late_recorded_value_leaks_without_the_option_and_not_with_it(tmp_path):
    spec = load_config(write_config(tmp_path)).sources["calibration"]
    reads = readings([("m1", ts(5, 12)), ("m1", ts(8))])
    table = versions([
        ("m1", ts(1), 1.0, ts(1), "raw_batch:a"),
        ("m1", ts(3), 3.0, ts(6), "raw_batch:c"),  # valid on the 3rd, recorded on the 6th: after the first reading, before the watermark
    ])  # fmt: skip
    assert _factors(reads, latest(table), JOIN, spec) == [3.0, 3.0]  # the leak
    assert _factors(reads, table, KNOWN, spec) == [1.0, 3.0]  # the previously known value, then the late one once recorded


def test_a_correction_recorded_later_is_not_seen_before_it_was_recorded(tmp_path):
    spec = load_config(write_config(tmp_path)).sources["calibration"]
    reads = readings([("m1", ts(5)), ("m1", ts(6)), ("m1", ts(7))])
    table = versions([
        ("m1", ts(2), 2.0, ts(2), "raw_batch:a"),
        ("m1", ts(2), 2.5, ts(6), "raw_batch:b"),  # the same key corrected on the 6th
    ])  # fmt: skip
    assert _factors(reads, latest(table), JOIN, spec) == [2.5, 2.5, 2.5]
    assert _factors(reads, table, KNOWN, spec) == [2.0, 2.5, 2.5]  # recorded at the example's instant: known (at or before)


def test_lag_moves_both_cutoffs_and_max_age_applies_to_the_known_row(tmp_path):
    spec = load_config(write_config(tmp_path)).sources["calibration"]
    reads = readings([("m1", ts(5, 12))])
    day = dt.timedelta(days=1)
    late = versions([("m1", ts(1), 1.0, ts(1), "raw_batch:a"), ("m1", ts(4), 4.0, ts(4, 18), "raw_batch:b")])
    exact = versions([("m1", ts(1), 1.0, ts(1), "raw_batch:a"), ("m1", ts(4), 4.0, ts(4, 12), "raw_batch:b")])
    lagged = replace(KNOWN, lag=day)  # cutoff: the 4th at noon
    assert _factors(reads, latest(late), replace(JOIN, lag=day), spec) == [4.0]
    assert _factors(reads, late, lagged, spec) == [1.0]  # recorded after time - lag, though before the example's time
    assert _factors(reads, exact, lagged, spec) == [4.0]  # recorded exactly at time - lag
    assert _factors(reads, late, replace(lagged, max_age=day), spec) == [None]  # the known row is 3.5 days old
    assert _factors(reads, late, replace(lagged, max_age=dt.timedelta(days=4)), spec) == [1.0]


def test_ties_on_valid_time_go_to_the_largest_key_known_at_the_cutoff(tmp_path):
    calibration = load_config(write_config(tmp_path)).sources["calibration"]
    spec = keyed_spec(calibration, ["meter_id", "calibrated_at", "rev"])
    reads = readings([("m1", ts(3)), ("m1", ts(6))])
    tied = versions([("m1", ts(2), 0.1, ts(2), "raw_batch:a"), ("m1", ts(2), 0.3, ts(5), "raw_batch:b"), ("m1", ts(2), 0.2, ts(2), "raw_batch:a")])
    tied = tied.append_column("rev", pa.array([1, 3, 2], pa.int64()))
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        assert _factors(reads, tied.take(order), KNOWN, spec) == [0.2, 0.3]  # rev 3 is recorded on the 5th


def test_a_version_whose_valid_time_moves_is_superseded_when_recorded(tmp_path):
    """A key whose correction moves its valid time: the superseded version is no candidate once the correction is known."""
    calibration = load_config(write_config(tmp_path)).sources["calibration"]
    spec = keyed_spec(calibration, ["meter_id", "rev"])
    reads = readings([("m1", ts(6)), ("m1", ts(8))])
    moved = versions([("m1", ts(5), 5.0, ts(5), "raw_batch:a"), ("m1", ts(9), 9.0, ts(7), "raw_batch:b"), ("m1", ts(2), 2.0, ts(2), "raw_batch:a")])
    moved = moved.append_column("rev", pa.array([1, 1, 2], pa.int64()))
    assert _factors(reads, moved, KNOWN, spec) == [5.0, 2.0]
    assert oracle(reads, moved, dt.timedelta(0), None, key=("meter_id", "rev")) == [5.0, 2.0]


def test_the_engine_needs_the_versions_and_their_recording_times(tmp_path):
    config = load_config(write_config(tmp_path))
    (definition,) = config.datasets
    definition = replace(definition, as_of_joins=(KNOWN,))
    reads = readings([("m1", ts(5))])
    table = versions([("m1", ts(1), 1.0, ts(1), "raw_batch:a")])
    with pytest.raises(AssemblyError, match="needs the versions of calibration"):
        assemble_examples(definition, reads, {"calibration": latest(table)}, config.sources, None)
    with pytest.raises(AssemblyError, match=r"lacks.*_recorded_at"):
        assemble_examples(definition, reads, {}, config.sources, None, versions={"calibration": latest(table)})
    examples, _ = assemble_examples(definition, reads, {}, config.sources, None, versions={"calibration": table})
    assert examples.column("factor").to_pylist() == [1.0]


def test_the_option_is_parsed_checked_and_part_of_the_recipe(tmp_path):
    plain = load_config(write_config(tmp_path / "plain")).datasets[0]
    known = load_config(write_config(tmp_path / "known", {"datasets/meter_readings_v1.yaml": DATASET.replace(PLAIN_LINE, KNOWN_LINE)})).datasets[0]
    assert plain.as_of_joins[0].known_at is None and known.as_of_joins[0].known_at == "example_time"
    assert "as_known_at" not in str(plain.recipe()) and known.recipe_hash != plain.recipe_hash
    assert plain.recipe_hash[:16] == FROZEN["meter_readings:v1"]
    fraud = load_definition(CONFIG_DIR / "datasets" / "fraud_training_set_v6.yaml")
    assert fraud.recipe_hash[:16] == FROZEN["fraud_training_set:v6"]
    bad = DATASET.replace(PLAIN_LINE, KNOWN_LINE.replace("example_time", "watermark"))
    with pytest.raises(ConfigError, match=r"as_of_joins\[0\]\.as_known_at.*example_time.*'watermark'"):
        load_config(write_config(tmp_path / "bad", {"datasets/meter_readings_v1.yaml": bad}))
    timeless = DATASET.replace(PLAIN_LINE, "  - {source: calibration, on: [meter_id], as_known_at: example_time}")
    with pytest.raises(ConfigError, match=r"as_of_joins\[0\]\.time.*as_known_at"):
        load_config(write_config(tmp_path / "timeless", {"datasets/meter_readings_v1.yaml": timeless}))
