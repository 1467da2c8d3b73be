"""Declarative derive and aggregate steps: exact decimals, local-time buckets unambiguous across DST, one-line config errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from dsv_platform.core.assembly.transform import aggregate, derive
from dsv_platform.core.config.aggregation import TransformError, parse_aggregate, parse_derive
from dsv_platform.core.config.dataset_definition import load_definition
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.examples.readings import CONFIG_DIR

UTC = dt.UTC
METER_COLUMN = "  - {name: meter_id, type: string}\n"
TS = pa.timestamp("us", tz="UTC")
AGG = {
    "group_by": ["meter_id"],
    "bucket": {"column": "at", "every": "1h", "timezone": "Europe/Berlin", "start": "hour", "local": "local", "offset_minutes": "off", "local_date": "day"},
    "measures": [{"name": "kwh", "sum": "kwh"}, {"name": "n", "count": "kwh"}, {"name": "peak", "max": "kwh"}],
}


def _readings(instants: list[dt.datetime], kwh: list[str | None]) -> pa.Table:
    return pa.table(
        {
            "meter_id": pa.array(["m"] * len(instants)),
            "at": pa.array(instants, TS),
            "kwh": pa.array([None if v is None else Decimal(v) for v in kwh], pa.decimal128(12, 3)),
        }
    )


def test_fall_back_hours_keep_the_same_local_label_apart_by_utc_start_and_offset():
    # 2026-10-25 in Berlin: 02:00-02:59 happens twice (+120 then +60)
    instants = [dt.datetime(2026, 10, 25, 0, 15, tzinfo=UTC), dt.datetime(2026, 10, 25, 0, 45, tzinfo=UTC), dt.datetime(2026, 10, 25, 1, 15, tzinfo=UTC)]
    out = aggregate(_readings(instants, ["0.100", "0.200", "0.400"]), parse_aggregate({"aggregate": AGG}, "t.yaml")).sort_by("hour").to_pylist()
    assert [(r["hour"], r["local"], r["off"], r["kwh"], r["n"], r["peak"]) for r in out] == [
        (dt.datetime(2026, 10, 25, 0, 0, tzinfo=UTC), "2026-10-25T02:00", 120, Decimal("0.300"), 2, Decimal("0.200")),
        (dt.datetime(2026, 10, 25, 1, 0, tzinfo=UTC), "2026-10-25T02:00", 60, Decimal("0.400"), 1, Decimal("0.400")),
    ]
    assert {r["day"] for r in out} == {dt.date(2026, 10, 25)}


def test_a_local_day_starts_at_local_midnight_and_nulls_are_skipped_and_not_counted():
    instants = [dt.datetime(2026, 1, 31, 22, 59, tzinfo=UTC), dt.datetime(2026, 1, 31, 23, 0, tzinfo=UTC), dt.datetime(2026, 1, 31, 23, 30, tzinfo=UTC)]
    out = aggregate(_readings(instants, ["1.000", None, "0.250"]), parse_aggregate({"aggregate": AGG}, "t.yaml")).sort_by("hour").to_pylist()
    assert [(r["local"], r["day"], r["kwh"], r["n"]) for r in out] == [
        ("2026-01-31T23:00", dt.date(2026, 1, 31), Decimal("1.000"), 1),
        ("2026-02-01T00:00", dt.date(2026, 2, 1), Decimal("0.250"), 1),
    ]


def test_derive_multiplies_exactly_and_rounds_once_half_to_even():
    a = pa.array([Decimal("1.005"), Decimal("2.000"), None], pa.decimal128(12, 3))
    rows = pa.table({"a": a, "f": pa.array([Decimal("0.5000")] * 3, pa.decimal128(6, 4))})
    spec = parse_derive({"derive": [{"name": "c", "multiply": ["a", "f"], "precision": 12, "scale": 3}]}, "t.yaml")
    assert derive(rows, spec).column("c").to_pylist() == [Decimal("0.502"), Decimal("1.000"), None]  # 0.5025 -> 0.502 (half even)
    with pytest.raises(TransformError, match=r"derived column 'c' needs column\(s\) \['f'\]"):
        derive(rows.drop_columns(["f"]), spec)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"every": "90m"}, "aggregate.bucket.every"),
        ({"every": "1d"}, "aggregate.bucket.every"),
        ({"timezone": "Europe/Atlantis"}, "aggregate.bucket.timezone"),
        ({"zone": "UTC"}, "aggregate.bucket"),
    ],
)
def test_a_bad_bucket_is_one_line_naming_the_file_and_key(change, key):
    with pytest.raises(ConfigError, match=rf"t\.yaml: key '{key}"):
        parse_aggregate({"aggregate": {**AGG, "bucket": {**AGG["bucket"], **change}}}, "t.yaml")


def test_a_measure_needs_exactly_one_function():
    with pytest.raises(ConfigError, match=r"key 'aggregate.measures\[0\]'.*exactly one of"):
        parse_aggregate({"aggregate": {**AGG, "measures": [{"name": "x", "sum": "kwh", "max": "kwh"}]}}, "t.yaml")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("multiply: [kwh, factor]", "multiply: [kwh, gain]", r"key 'derive': column 'gain' comes from no source"),
        ("{name: kwh, sum: kwh_calibrated}", "{name: kwh, sum: kwh_adjusted}", r"key 'aggregate': column 'kwh_adjusted' comes from no source"),
        (METER_COLUMN, METER_COLUMN + "    - {name: quality, type: string}\n", "key 'contract.columns': column 'quality'"),
    ],
)
def test_a_transform_reading_or_losing_a_column_is_refused_at_load(tmp_path, old, new, message):
    config = tmp_path / "config"
    for sub in ("sources", "datasets"):
        (config / sub).mkdir(parents=True)
        for path in (CONFIG_DIR / sub).glob("*.yaml"):
            (config / sub / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    path = config / "datasets" / "readings_hourly_v1.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"readings_hourly_v1\.yaml: {message}"):
        load_config(config)


def test_the_readings_definition_records_its_time_zone_and_has_no_split_policy():
    definition = load_definition(CONFIG_DIR / "datasets" / "readings_hourly_v1.yaml")
    assert definition.zones == ("Europe/Berlin",) and definition.split_policy is None
    assert definition.recipe()["aggregate"]["bucket"]["timezone"] == "Europe/Berlin"
    assert definition.entity_column == "example_id"  # a composite key's example id (core/identity/example_id.py)
