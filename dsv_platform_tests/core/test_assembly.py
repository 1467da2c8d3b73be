import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.core.assembly.assembly import AssemblyError, as_of_join, assemble_examples
from dsv_platform.core.config.dataset_definition import AsOfJoin
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.labels import LABEL_DEFINITIONS, compute_labels
from dsv_platform_tests.core.config_support import write_config

UTC = dt.UTC
FRAUD = load_config(CONFIG_DIR)
DOMAIN = FraudDomain(rows_per_day=300)
DAYS = DOMAIN.days(12)


def _legacy_assemble(definition, tx, features, labels):
    """A frozen copy of the pre-configuration ``assemble`` join (services/publication/realization.py), as the oracle."""
    window, population = definition.observation_window, definition.population_filter
    days = tx.column(window.column)
    keep = pc.and_(pc.greater_equal(days, pa.scalar(window.start, pa.date32())), pc.less_equal(days, pa.scalar(window.end, pa.date32())))
    tx = tx.filter(pc.and_(keep, pc.is_in(tx.column(population.column), pa.array(population.values, tx.schema.field(population.column).type))))
    feature_day = pc.cast(pc.subtract(pc.cast(tx.column("event_date"), pa.int32()), pa.scalar(1, pa.int32())), pa.date32())
    tx = tx.append_column("feature_date", feature_day)
    tx = tx.join(features.select(["account_id", "feature_date", *definition.features]), keys=["account_id", "feature_date"], join_type="left outer")
    joined = tx.join(labels.select(["transaction_id", "is_fraud", "label_version"]), keys="transaction_id", join_type="inner")
    return joined.select(definition.contract.column_names).cast(definition.contract.arrow_schema), tx.num_rows


def _fraud_inputs(version):
    tx = pa.concat_tables([DOMAIN.transactions(d) for d in DAYS])
    features = pa.concat_tables([DOMAIN.account_features(d) for d in DAYS])
    chargebacks = pa.concat_tables([DOMAIN.chargebacks_filed_for(d) for d in DAYS])
    labels = FRAUD.label("fraud", version).compute({"transactions": tx, "chargebacks": chargebacks})
    assert labels.equals(compute_labels(tx, chargebacks, LABEL_DEFINITIONS[version]))
    return tx, features, labels


@pytest.mark.parametrize("version", [5, 6])
def test_the_fraud_config_reproduces_the_legacy_assembly_byte_for_byte(version):
    definition = FRAUD.dataset("fraud_training_set", f"v{version}")
    tx, features, labels = _fraud_inputs(version)
    old, old_population = _legacy_assemble(definition, tx, features, labels)
    new, population = assemble_examples(definition, tx, {"account_features": features}, FRAUD.sources, labels)
    key = [("transaction_id", "ascending")]
    assert population == old_population and new.num_rows == old.num_rows > 1000
    assert new.equals(old.sort_by(key), check_metadata=True)
    assert hash_table(new, definition.contract).content_hash == hash_table(old, definition.contract).content_hash
    assert pc.sum(pc.is_null(new.column("txn_count_7d"))).as_py() > 0  # the first day and accounts idle for a week


def test_without_max_age_older_features_fill_the_gaps():
    definition = FRAUD.dataset("fraud_training_set", "v6")
    join = definition.as_of_joins[0]
    tx, features, _ = _fraud_inputs(6)
    exact = as_of_join(tx, features, join, FRAUD.sources["account_features"], ["txn_count_7d"])
    latest = as_of_join(tx, features, AsOfJoin(join.source, join.on, join.time, join.lag), FRAUD.sources["account_features"], ["txn_count_7d"])
    differ = pc.invert(pc.equal(exact.column("txn_count_7d"), latest.column("txn_count_7d")).is_valid())
    changed = latest.filter(pc.and_(differ, pc.is_valid(latest.column("txn_count_7d"))))
    assert changed.num_rows > 0 and pc.all(pc.is_null(exact.filter(pc.and_(differ, pc.is_valid(latest.column("txn_count_7d")))).column("txn_count_7d"))).as_py()
    same = pc.equal(exact.column("txn_count_7d"), latest.column("txn_count_7d"))
    assert pc.all(pc.fill_null(same, True)).as_py()


def _ts(day, hour=0):
    return dt.datetime(2026, 1, day, hour, tzinfo=UTC)


def _meters(tmp_path):
    config = load_config(write_config(tmp_path))
    readings = pa.table(
        {
            "reading_id": ["r1", "r2", "r3", "r4", "r5", "r6"],
            "meter_id": ["m1", "m1", "m1", "m2", "m3", "m1"],
            "read_at": pa.array([_ts(2, 12), _ts(5), _ts(9), _ts(3), _ts(3), _ts(2, 12)], pa.timestamp("us", tz="UTC")),
            "read_day": pa.array([dt.date(2026, 1, d) for d in (2, 5, 9, 3, 3, 2)]),
            "kwh": pa.array(["1.5", "2", "3", "4", "5", "6"]).cast(pa.decimal128(12, 3)),
            "site": ["a", None, "a", "b", "c", "a"],
        }
    )
    calibration = pa.table(
        {
            "meter_id": ["m1", "m1", "m1", "m2", "m1"],
            "calibrated_at": pa.array([_ts(1), _ts(5), _ts(7), _ts(4), _ts(2, 12)], pa.timestamp("us", tz="UTC")),
            "calibrated_day": pa.array([dt.date(2026, 1, d) for d in (1, 5, 7, 4, 2)]),
            "factor": [1.0, 1.1, 1.2, 2.0, 0.9],
        }
    )
    return config, readings, calibration


def test_an_unlike_dataset_joins_as_of_its_reading_time(tmp_path):
    config, readings, calibration = _meters(tmp_path)
    (definition,) = config.datasets
    examples, population = assemble_examples(definition, readings, {"calibration": calibration}, config.sources, None)
    assert population == examples.num_rows == 6 and examples.schema == definition.contract.arrow_schema
    factors = dict(zip(examples.column("reading_id").to_pylist(), examples.column("factor").to_pylist(), strict=True))
    # r1, r6 read at the instant of a calibration (lag 0d: at or before counts); r2 at 5th 00:00 = a calibration;
    # r3 after the 7th; r4: m2's only calibration comes a day later (recorded later in valid time): null; r5 none.
    assert factors == {"r1": 0.9, "r2": 1.1, "r3": 1.2, "r4": None, "r5": None, "r6": 0.9}


def test_window_lag_ties_and_nulls(tmp_path):
    config, readings, calibration = _meters(tmp_path)
    join = AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(hours=13))
    spec = config.sources["calibration"]
    out = as_of_join(readings, calibration, join, spec, ["factor"])
    assert out.column("factor").to_pylist() == [1.0, 0.9, 1.2, None, None, 1.0]
    tied = pa.table(
        {"meter_id": ["m1", "m1", "m1"], "calibrated_at": pa.array([_ts(2)] * 3, pa.timestamp("us", tz="UTC")), "rev": [1, 3, 2], "factor": [0.1, 0.3, 0.2]}
    )
    tie_spec = _spec("calibration", ["meter_id", "calibrated_at", "rev"], "calibrated_at", [("meter_id", "string"), ("rev", "int64"), ("factor", "int64")])
    at_zero = AsOfJoin("calibration", ("meter_id",), "read_at", dt.timedelta(0))
    for order in ([0, 1, 2], [2, 1, 0], [1, 0, 2]):  # a tie goes to the largest key, whatever the row order
        assert as_of_join(readings, tied.take(order), at_zero, tie_spec, ["factor"]).column("factor").to_pylist() == [0.3, 0.3, 0.3, None, None, 0.3]
    nulls = readings.set_column(1, "meter_id", pa.array([None, "m1", "m1", "m2", "m3", "m1"]))
    assert as_of_join(nulls, calibration, join, spec, ["factor"]).column("factor")[0].as_py() is None
    definition = config.datasets[0]
    window = type(definition.observation_window)("read_at", dt.date(2026, 1, 3), dt.date(2026, 1, 5))
    from dataclasses import replace

    narrow, _ = assemble_examples(replace(definition, observation_window=window), readings, {"calibration": calibration}, config.sources, None)
    assert narrow.column("reading_id").to_pylist() == ["r2", "r4", "r5"]


def _spec(name, key, valid_time, columns):
    from dataclasses import replace

    from dsv_platform.core.contracts.contract import parse_contract

    cols = [{"name": valid_time, "type": "timestamp", "resolution": "us"}, *({"name": n, "type": t} for n, t in columns)]
    contract = parse_contract({"name": name, "key": key, "partition_by": valid_time, "columns": cols})
    return replace(FRAUD.sources["transactions"], name=name, contract=contract, valid_time=valid_time, entity=key[0], aliases={})


def test_a_date_base_against_timestamp_valid_time_uses_midnight():
    left = pa.table({"k": ["a", "a"], "day": pa.array([dt.date(2026, 1, 2), dt.date(2026, 1, 3)])})
    right = pa.table({"k": ["a", "a"], "at": pa.array([_ts(2, 0), _ts(2, 6)], pa.timestamp("us", tz="UTC")), "v": [1, 2]})
    spec = _spec("r", ["k", "at"], "at", [("k", "string"), ("v", "int64")])
    out = as_of_join(left, right, AsOfJoin("r", ("k",), "day", dt.timedelta(0)), spec, ["v"])
    assert out.column("v").to_pylist() == [1, 2]


def test_labels_join_on_the_key_and_must_be_unique():
    definition = FRAUD.dataset("fraud_training_set", "v6")
    tx, features, labels = _fraud_inputs(6)
    few = labels.slice(0, 50)
    examples, population = assemble_examples(definition, tx, {"account_features": features}, FRAUD.sources, few)
    assert examples.num_rows <= 50 < population
    with pytest.raises(AssemblyError, match="more than one row"):
        assemble_examples(definition, tx, {"account_features": features}, FRAUD.sources, pa.concat_tables([few, few]))
    with pytest.raises(AssemblyError, match="no label table"):
        assemble_examples(definition, tx, {"account_features": features}, FRAUD.sources, None)
    with pytest.raises(AssemblyError, match="lacks"):
        assemble_examples(definition, tx, {"account_features": features}, FRAUD.sources, few.drop_columns(["is_fraud"]))
