"""Issue 23 item 1: CSV landing reads strings literally; a null marker exists only where the source declares one.

Before: pyarrow's default null markers turned the strings NA (sodium; Namibia), N/A, null and NULL into nulls,
and the rows were rejected in a non-nullable column (40 of 70 rows in one trial).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.core.config.source import parse_source
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.ingest.batch import prepare_batch

SOURCE = {
    "name": "labs",
    "key": ["result_id"],
    "partition_by": "day",
    "valid_time": "day",
    "columns": [
        {"name": "result_id", "type": "int64"},
        {"name": "day", "type": "date"},
        {"name": "analyte", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "comment", "type": "string", "nullable": True},
    ],
}
LITERALS = ["NA", "N/A", "null", "NULL", "nan", "NaN", "#N/A", "n/a", "-nan", "None"]


def spec(tmp_path: Path, **landing: object):
    return parse_source({**SOURCE, "landing": {"format": "csv", **landing}}, file=tmp_path / "labs.yaml")


def csv(rows: list[str]) -> bytes:
    return ("result_id,day,analyte,country,comment\n" + "".join(f"{r}\n" for r in rows)).encode()


def test_na_and_friends_are_text_in_string_columns(tmp_path: Path) -> None:
    rows = [f'{i},2026-06-01,{value},{value},{value}' for i, value in enumerate(LITERALS)]
    batch = prepare_batch(csv(rows), spec(tmp_path))
    assert batch.rejected.num_rows == 0, batch.report.failures
    assert batch.accepted.column("analyte").to_pylist() == LITERALS
    assert batch.accepted.column("country").to_pylist() == LITERALS
    assert batch.accepted.column("comment").to_pylist() == LITERALS


def test_only_an_empty_unquoted_cell_is_null_by_default(tmp_path: Path) -> None:
    batch = prepare_batch(csv(['1,2026-06-01,Na,NA,', '2,2026-06-01,K,DE,""']), spec(tmp_path))
    assert batch.accepted.column("comment").to_pylist() == [None, ""]
    assert batch.accepted.column("country").to_pylist() == ["NA", "DE"]


def test_declared_null_values_are_the_only_markers(tmp_path: Path) -> None:
    declared = spec(tmp_path, null_values=["", "NULL"])
    batch = prepare_batch(csv(['1,2026-06-01,Na,NA,NULL', '2,2026-06-01,K,DE,null', '3,2026-06-01,K,DE,"NULL"']), declared)
    assert batch.accepted.column("comment").to_pylist() == [None, "null", "NULL"]  # a quoted cell is always text
    none_at_all = prepare_batch(csv(['1,2026-06-01,Na,NA,']), spec(tmp_path, null_values=[]))
    assert none_at_all.accepted.column("comment").to_pylist() == [""]


def test_a_null_marker_in_a_required_column_is_still_rejected_naming_it(tmp_path: Path) -> None:
    batch = prepare_batch(csv(['1,2026-06-01,,DE,x']), spec(tmp_path))
    assert batch.accepted.num_rows == 0 and batch.rejected.num_rows == 1
    assert {f.column for f in batch.report.failures} == {"analyte"}


BAD = [({"format": "parquet", "null_values": [""]}, "csv landings only"), ({"format": "csv", "null_values": "NA"}, "list of strings")]


@pytest.mark.parametrize(("landing", "message"), BAD)
def test_bad_null_values_are_configuration_errors_naming_the_key(tmp_path: Path, landing: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_source({**SOURCE, "landing": landing}, file=tmp_path / "labs.yaml")
    assert "landing.null_values" in str(caught.value) and "labs.yaml" in str(caught.value)
