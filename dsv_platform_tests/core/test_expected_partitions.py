"""The expected-partitions gate's configuration and verdicts (issue 27 item 9), on the fraud example's v6 definition file."""

from __future__ import annotations

import datetime as dt

import pytest

from dsv_platform.core.config.dataset_definition import parse_definition
from dsv_platform.core.config.expected_partitions import ExpectedPartitions, expected_partitions_gates
from dsv_platform.core.config_yaml import ConfigError, read_yaml
from dsv_platform_tests.scenarios.support import CONFIG_DIR

V6 = CONFIG_DIR / "datasets" / "fraud_training_set_v6.yaml"
JUNE = [dt.date(2026, 6, 1) + dt.timedelta(days=i) for i in range(30)]


def _parse(expected: object):  # type: ignore[no-untyped-def]
    doc = read_yaml(V6)
    doc["gates"] = {**doc["gates"], "expected_partitions": expected}
    return parse_definition(doc, source=V6)


def test_every_day_and_declared_empty_days_parse() -> None:
    assert _parse("every_day").gates.expected_partitions == ExpectedPartitions()
    parsed = _parse({"declared_empty": ["2026-06-14", "2026-06-02", "2026-06-14"]}).gates.expected_partitions
    assert parsed == ExpectedPartitions((dt.date(2026, 6, 2), dt.date(2026, 6, 14)))
    assert parse_definition(read_yaml(V6), source=V6).gates.expected_partitions is None  # opt-in: the example's gates are unchanged


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"declared_empty": ["2026-07-01"]}, "2026-07-01 is outside the observation window 2026-06-01..2026-06-30"),
        ({"declared_empty": ["June 3"]}, "not a day (YYYY-MM-DD): 'June 3'"),
        ({"declared_empty": "2026-06-03"}, "must be a list of days"),
        ({"empty": []}, "empty"),
        ("some_days", "must be 'every_day' or {declared_empty: [days]}"),
    ],
)
def test_a_bad_declaration_is_a_configuration_error_naming_file_key_and_value(value: object, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(value)
    assert says in str(info.value) and "fraud_training_set_v6.yaml" in str(info.value) and "gates.expected_partitions" in str(info.value)


def test_a_dataset_not_partitioned_by_the_window_column_cannot_ask_for_it() -> None:
    doc = read_yaml(V6)
    doc["gates"] = {**doc["gates"], "expected_partitions": "every_day"}
    doc["contract"] = {k: v for k, v in doc["contract"].items() if k != "partition_by"}
    with pytest.raises(ConfigError, match="partitioned by the observation window's date column 'event_date'"):
        parse_definition(doc, source=V6)


def test_a_missing_day_blocks_naming_it_and_a_declared_empty_day_with_rows_warns() -> None:
    present = {f"event_date={d.isoformat()}" for d in JUNE if d.day not in (6, 20)}
    [ok] = expected_partitions_gates(ExpectedPartitions((dt.date(2026, 6, 6), dt.date(2026, 6, 20))), JUNE, "event_date", present)
    assert ok.passed and ok.blocking and ok.detail["expected"] == 28 and ok.detail["missing"] is None
    [blocked] = expected_partitions_gates(ExpectedPartitions((dt.date(2026, 6, 6),)), JUNE, "event_date", present)
    assert not blocked.passed and blocked.blocking and blocked.detail["missing"] == "2026-06-20" and blocked.detail["present"] == 28
    gate, stale = expected_partitions_gates(ExpectedPartitions((dt.date(2026, 6, 1), dt.date(2026, 6, 6), dt.date(2026, 6, 20))), JUNE, "event_date", present)
    assert gate.passed and not stale.passed and not stale.blocking and stale.detail["days"] == "2026-06-01"
    [none] = expected_partitions_gates(ExpectedPartitions(), JUNE, "event_date", set())
    assert none.detail["missing"] == ", ".join(d.isoformat() for d in JUNE[:10]) + " and 20 more"
