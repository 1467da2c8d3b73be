"""The out-of-core assembly (DuckDB) against the in-memory one: the same rows, the same population, the same errors."""

import datetime as dt
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsv_platform.core.assembly.assembly import AssemblyError, assemble_examples
from dsv_platform.core.assembly.assembly_sql import unsupported
from dsv_platform.core.config.dataset_definition import AsOfJoin, ObservationWindow
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.examples.readings import CONFIG_DIR as READINGS_CONFIG
from dsv_platform.services.publication.assembly_engine import assemble_tables, engine_refusal
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.core.test_assembly import FRAUD, _fraud_inputs, _meters, _spec, _ts


def _both(definition, base, joined, specs, labels=None, **kw):
    """Assemble with both engines; assert they agree exactly; return the rows and the population."""
    expected = assemble_examples(definition, base, joined, specs, labels, **kw)
    got = assemble_tables(definition, base, joined, specs, labels, **kw)
    assert got[1] == expected[1]
    assert got[0].schema == expected[0].schema
    assert got[0].equals(expected[0]), (got[0].to_pylist()[:5], expected[0].to_pylist()[:5])
    return expected


@pytest.mark.parametrize("version", [5, 6])
def test_the_fraud_training_set_is_the_same_rows_out_of_core(version):
    definition = FRAUD.dataset("fraud_training_set", f"v{version}")
    tx, features, labels = _fraud_inputs(version)
    examples, population = _both(definition, tx, {"account_features": features}, FRAUD.sources, labels)
    assert population >= examples.num_rows > 1000
    assert engine_refusal(definition, list(FRAUD.sources.values())) is None
    out_of_core, _ = assemble_tables(definition, tx, {"account_features": features}, FRAUD.sources, labels)
    assert hash_table(out_of_core, definition.contract).content_hash == hash_table(examples, definition.contract).content_hash


def test_meters_lag_max_age_window_and_time_zones(tmp_path):
    config, readings, calibration = _meters(tmp_path)
    (definition,) = config.datasets
    _both(definition, readings, {"calibration": calibration}, config.sources)
    for lag, max_age in [(dt.timedelta(hours=13), None), (dt.timedelta(0), dt.timedelta(days=2)), (dt.timedelta(hours=1, seconds=1), dt.timedelta(hours=12))]:
        join = AsOfJoin("calibration", ("meter_id",), "read_at", lag, max_age)
        _both(replace(definition, as_of_joins=(join,)), readings, {"calibration": calibration}, config.sources)
    for tz in (None, "Pacific/Kiritimati", "America/St_Johns"):
        window = ObservationWindow("read_at", dt.date(2026, 1, 3), dt.date(2026, 1, 5), tz)
        _both(replace(definition, observation_window=window), readings, {"calibration": calibration}, config.sources)


def test_ties_on_valid_time_go_to_the_largest_key_in_any_row_order(tmp_path):
    config, readings, _ = _meters(tmp_path)
    (definition,) = config.datasets
    tied = pa.table(
        {"meter_id": ["m1", "m1", "m1"], "calibrated_at": pa.array([_ts(2)] * 3, pa.timestamp("us", tz="UTC")), "rev": [1, 3, 2], "factor": [1, 3, 2]}
    )
    spec = _spec("calibration", ["meter_id", "calibrated_at", "rev"], "calibrated_at", [("meter_id", "string"), ("rev", "int64"), ("factor", "int64")])
    specs = {**config.sources, "calibration": spec}
    at_zero = replace(definition, as_of_joins=(AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(0)),))
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):
        examples, _ = _both(at_zero, readings, {"calibration": tied.take(order)}, specs)
        assert set(examples.column("factor").to_pylist()) == {3.0, None}


def test_labels_are_joined_on_the_key_and_must_be_unique():
    definition = FRAUD.dataset("fraud_training_set", "v6")
    tx, features, labels = _fraud_inputs(6)
    few = labels.slice(0, 50)
    _both(definition, tx, {"account_features": features}, FRAUD.sources, few)
    for bad, message in [(pa.concat_tables([few, few]), "more than one row"), (None, "no label table"), (few.drop_columns(["is_fraud"]), "lacks")]:
        with pytest.raises(AssemblyError, match=message):
            assemble_tables(definition, tx, {"account_features": features}, FRAUD.sources, bad)


def test_derived_columns_and_nanoseconds_take_the_in_memory_path(tmp_path):
    config = load_config(write_config(tmp_path))
    (definition,) = config.datasets
    assert engine_refusal(definition, list(config.sources.values())) is None
    readings = load_config(READINGS_CONFIG)
    derived = [d for d in readings.datasets if d.derive or d.aggregate is not None]
    assert derived and all("in memory" in (engine_refusal(d, list(readings.sources.values())) or "") for d in derived)
    assert "nanosecond" in (unsupported(pa.schema([pa.field("at", pa.timestamp("ns", tz="UTC"))])) or "")
    assert unsupported(pa.schema([pa.field("x", pa.decimal128(38, 2))])) is None
    assert "76 digits" in (unsupported(pa.schema([pa.field("x", pa.decimal256(76, 2))])) or "")


_times = st.integers(min_value=0, max_value=20).map(lambda h: _ts(1) + dt.timedelta(hours=h * 7))


@settings(max_examples=40, deadline=None)
@given(
    reads=st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3", "m4"]), _times), min_size=1, max_size=25),
    cals=st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3"]), _times, st.floats(allow_nan=False, width=32)), max_size=25),
    lag_hours=st.integers(min_value=0, max_value=30),
    max_age_hours=st.one_of(st.none(), st.integers(min_value=0, max_value=50)),
)
def test_random_as_of_joins_agree(tmp_path_factory, reads, cals, lag_hours, max_age_hours):
    config = load_config(write_config(tmp_path_factory.mktemp("cfg")))
    (definition,) = config.datasets
    readings = pa.table(
        {
            "reading_id": [f"r{i:03d}" for i in range(len(reads))],
            "meter_id": pa.array([m for m, _ in reads], pa.string()),
            "read_at": pa.array([t for _, t in reads], pa.timestamp("us", tz="UTC")),
            "read_day": pa.array([t.date() for _, t in reads], pa.date32()),
            "kwh": pa.array(["1"] * len(reads)).cast(pa.decimal128(12, 3)),
            "site": pa.array([None] * len(reads), pa.string()),
        }
    )
    unique = {(m, t): f for m, t, f in cals}
    calibration = pa.table(
        {
            "meter_id": pa.array([m for m, _ in unique], pa.string()),
            "calibrated_at": pa.array([t for _, t in unique], pa.timestamp("us", tz="UTC")),
            "calibrated_day": pa.array([t.date() for _, t in unique], pa.date32()),
            "factor": pa.array(list(unique.values()), pa.float64()),
        }
    )
    max_age = None if max_age_hours is None else dt.timedelta(hours=max_age_hours)
    join = AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(hours=lag_hours), max_age)
    _both(replace(definition, as_of_joins=(join,)), readings, {"calibration": calibration}, config.sources)


@settings(max_examples=30, deadline=None)
@given(
    versions=st.lists(
        st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 5), st.sampled_from(["raw_batch:a", "raw_batch:b", "raw_batch:c"]), st.integers(0, 99)),
        max_size=30,
        unique_by=lambda v: (v[0], v[1], v[2]),
    ),
    watermark_hour=st.integers(0, 6),
    excluded=st.sets(st.sampled_from(["raw_batch:a", "raw_batch:b", "raw_batch:c"]), max_size=2),
)
def test_the_latest_row_per_key_as_known_at_the_watermark_agrees(versions, watermark_hour, excluded):
    """latest_sql against the adapter's latest_per_key after the as-of and exclusion filters (what CanonicalTables.read does)."""
    from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, load_table
    from dsv_platform.adapters.iceberg.iceberg_values import BATCH, RECORDED_AT, latest_per_key
    from dsv_platform.core.assembly.assembly_sql import latest_sql

    recorded = [_ts(1) + dt.timedelta(hours=h) for _, h, _, _ in versions]
    raw = pa.table({
        "k": pa.array([v[0] for v in versions], pa.string()),
        "value": pa.array([v[3] for v in versions], pa.int64()),
        RECORDED_AT: pa.array(recorded, pa.timestamp("us", tz="UTC")),
        BATCH: pa.array([v[2] for v in versions], pa.string()),
    })  # fmt: skip
    watermark = _ts(1) + dt.timedelta(hours=watermark_hour)
    kept = raw.filter(pa.compute.and_(pa.compute.less_equal(raw.column(RECORDED_AT), pa.scalar(watermark, pa.timestamp("us", tz="UTC"))),
                                      pa.compute.invert(pa.compute.is_in(raw.column(BATCH), pa.array(sorted(excluded), pa.string())))))  # fmt: skip
    expected = latest_per_key(kept, ("k",)).select(["k", "value"])
    with engine(EngineLimits(memory=64 << 20)) as con:
        load_table(con, "raw", raw)
        load_table(con, "excluded", pa.table({"batch": pa.array(sorted(excluded), pa.string())}))
        got = con.sql(latest_sql("raw", ("k",), ("k", "value"), watermark, excluding="excluded")).to_arrow_table().sort_by("k")
    assert got.to_pylist() == expected.to_pylist()


def test_the_build_folder_is_gone_after_the_build_and_a_killed_builds_folder_is_swept(tmp_path):
    """A build's database holds example rows (subjects too): it must not outlive the build, nor a killed one."""
    import os
    import subprocess

    from dsv_platform.adapters.engine.duckdb_engine import OWNER, EngineLimits, engine, engine_cursor, load_table

    spill = tmp_path / "spill"
    with engine(EngineLimits(memory=64 << 20, spill_root=spill)) as con:
        load_table(con, "t", pa.table({"subject": ["acct_1"] * 1000}))
        engine_cursor(con).sql("SELECT count(*) FROM t").fetchall()  # a cursor left open must not keep the folder alive
    assert list(spill.iterdir()) == []
    gone = subprocess.Popen(["true"])  # a process that has exited: its pid names no live process
    gone.wait()
    (spill / "build-killed").mkdir()
    (spill / "build-killed" / OWNER).write_text(str(gone.pid))
    (spill / "build-killed" / "build.duckdb.wal").write_text("acct_1")
    (spill / "build-live").mkdir()
    (spill / "build-live" / OWNER).write_text(str(os.getpid()))
    with engine(EngineLimits(memory=64 << 20, spill_root=spill)):
        assert not (spill / "build-killed").exists() and (spill / "build-live").exists()
