"""``as_known_at: example_time`` out of core (DuckDB) against in memory (Arrow) and a brute-force oracle: the same rows."""

import datetime as dt
from dataclasses import replace

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv_platform.core.assembly.assembly import assemble_examples
from dsv_platform.core.config.dataset_definition import AsOfJoin
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.services.publication.assembly_engine import assemble_tables
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.core.known_at_support import keyed_spec, latest, oracle, readings, ts, versions

KNOWN = AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(0), known_at="example_time")
BATCHES = ["raw_batch:a", "raw_batch:b", "raw_batch:c"]


def _both(definition, base, specs, table, joined=None):
    """Assemble with both engines (the versions of calibration, and ``joined`` latest tables); assert they agree; return the rows."""
    joined = joined or {}
    expected, population = assemble_examples(definition, base, joined, specs, None, versions={"calibration": table})
    got, got_population = assemble_tables(definition, base, joined, specs, None, versions={"calibration": table})
    assert got_population == population and got.schema == expected.schema
    assert got.equals(expected), (got.to_pylist()[:5], expected.to_pylist()[:5])
    return expected


def _definition(tmp_path, join):
    config = load_config(write_config(tmp_path))
    (definition,) = config.datasets
    return replace(definition, as_of_joins=(join,)), config.sources


def test_fixed_cases_agree_late_values_corrections_lag_and_max_age(tmp_path):
    definition, specs = _definition(tmp_path, KNOWN)
    reads = readings([("m1", ts(5, 12)), ("m1", ts(8)), ("m2", ts(4)), ("m3", ts(4)), ("m1", ts(6))])
    table = versions([
        ("m1", ts(1), 1.0, ts(1), "raw_batch:a"),
        ("m1", ts(3), 3.0, ts(6), "raw_batch:c"),  # recorded late
        ("m1", ts(1), 1.5, ts(5, 12), "raw_batch:b"),  # a correction recorded at the first reading's instant
        ("m2", ts(2), 2.0, ts(2), "raw_batch:a"),
        ("m2", ts(3), None, ts(3), "raw_batch:a"),  # a null value known: joined as null
    ])  # fmt: skip
    examples = _both(definition, reads, specs, table)
    assert examples.column("factor").to_pylist() == [1.5, 3.0, None, None, 3.0]
    for lag, max_age in [(dt.timedelta(hours=12), None), (dt.timedelta(days=1), dt.timedelta(days=2)), (dt.timedelta(0), dt.timedelta(hours=1))]:
        join = replace(KNOWN, lag=lag, max_age=max_age)
        examples = _both(replace(definition, as_of_joins=(join,)), reads, specs, table)
        assert examples.column("factor").to_pylist() == oracle(examples, table, lag, max_age)


def test_ties_and_moving_valid_times_agree(tmp_path):
    config = load_config(write_config(tmp_path))
    (definition,) = config.datasets
    spec = keyed_spec(config.sources["calibration"], ["meter_id", "rev"])
    specs = {**config.sources, "calibration": spec}
    reads = readings([("m1", ts(3)), ("m1", ts(6)), ("m1", ts(8))])
    table = versions([("m1", ts(2), 0.1, ts(2), "raw_batch:a"), ("m1", ts(2), 0.3, ts(5), "raw_batch:b"), ("m1", ts(9), 0.9, ts(7), "raw_batch:c")])
    table = table.append_column("rev", pa.array([1, 3, 3], pa.int64()))
    examples = _both(replace(definition, as_of_joins=(KNOWN,)), reads, specs, table)
    assert examples.column("factor").to_pylist() == [0.1, 0.3, 0.1]


def test_with_every_value_known_before_the_examples_the_two_joins_agree(tmp_path):
    definition, specs = _definition(tmp_path, KNOWN)
    reads = readings([("m1", ts(20)), ("m2", ts(21)), ("m1", ts(25))])
    table = versions([("m1", ts(1), 1.0, ts(1), "raw_batch:a"), ("m1", ts(1), 1.1, ts(3), "raw_batch:b"), ("m2", ts(22), 2.0, ts(4), "raw_batch:a")])
    known = _both(definition, reads, specs, table)
    plain, _ = assemble_examples(replace(definition, as_of_joins=(replace(KNOWN, known_at=None),)), reads, {"calibration": latest(table)}, specs, None)
    assert known.equals(plain) and known.column("factor").to_pylist() == [1.1, None, 1.1]


_hours = st.integers(min_value=0, max_value=24).map(lambda h: ts(1) + dt.timedelta(hours=h * 5))


@settings(max_examples=40, deadline=None)
@given(
    reads=st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3"]), _hours), min_size=3, max_size=20),
    rows=st.lists(
        st.tuples(st.sampled_from(["m1", "m2"]), st.integers(0, 1), _hours, st.integers(0, 30), st.sampled_from(BATCHES), st.integers(0, 99)),
        max_size=25,
        unique_by=lambda r: (r[0], r[1], r[3], r[4]),
    ),
    lag_hours=st.integers(min_value=0, max_value=30),
    max_age_hours=st.one_of(st.none(), st.integers(min_value=0, max_value=60)),
    keyed_by_valid_time=st.booleans(),
)
def test_random_known_at_joins_agree_with_each_other_and_the_oracle(tmp_path_factory, reads, rows, lag_hours, max_age_hours, keyed_by_valid_time):
    """Versions of (meter, rev) keys recorded at random hours; with ``keyed_by_valid_time`` the key also holds the valid time, else a correction may move it."""
    config = load_config(write_config(tmp_path_factory.mktemp("cfg")))
    (definition,) = config.datasets
    key = ["meter_id", "calibrated_at", "rev"] if keyed_by_valid_time else ["meter_id", "rev"]
    spec = keyed_spec(config.sources["calibration"], key)
    recorded = [ts(1) + dt.timedelta(hours=r[3] * 4) for r in rows]
    table = versions([(m, valid, float(v), at, b) for (m, _, valid, _, b, v), at in zip(rows, recorded, strict=True)])
    table = table.append_column("rev", pa.array([r[1] for r in rows], pa.int64()))
    lag = dt.timedelta(hours=lag_hours)
    max_age = None if max_age_hours is None else dt.timedelta(hours=max_age_hours)
    join = replace(KNOWN, lag=lag, max_age=max_age)
    examples = _both(replace(definition, as_of_joins=(join,)), readings(reads), {**config.sources, "calibration": spec}, table)
    assert examples.column("factor").to_pylist() == oracle(examples, table, lag, max_age, key=tuple(key))


def test_a_reference_table_is_the_lookup_of_the_version_known_at_the_cutoff(tmp_path):
    definition, specs = _definition(tmp_path, KNOWN)
    specs = {**specs, "calibration": keyed_spec(specs["calibration"], ["meter_id"], reference=True)}  # rows valid at any time
    reads = readings([("m1", ts(3)), ("m1", ts(6)), ("m2", ts(6))])
    table = versions([("m1", ts(20), 1.0, ts(2), "raw_batch:a"), ("m1", ts(20), 2.0, ts(5), "raw_batch:b")])
    table = table.append_column("rev", pa.array([0, 0], pa.int64()))
    examples = _both(definition, reads, specs, table)
    assert examples.column("factor").to_pylist() == [1.0, 2.0, None]
