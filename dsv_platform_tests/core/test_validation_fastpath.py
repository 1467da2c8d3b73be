"""Issue 22: a streamed record batch skips Pandera only when an Arrow pre-check proves Pandera would report nothing.

For each kind of failure Pandera finds (a null where none is allowed, a NaN, a value outside the allowed ones or
the range) the pre-check must say "not surely valid", and ``validate(..., unique=False)`` must report exactly the
failures Pandera reports; for clean rows the pre-check holds and Pandera agrees there is nothing to report.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest
from pandera.errors import SchemaErrors

from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.contracts.validation import _surely_valid, pandera_schema, to_frame, validate

CONTRACT = parse_contract({
    "name": "c", "key": ["id"],
    "columns": [
        {"name": "id", "type": "string"},
        {"name": "kind", "type": "string", "allowed_values": ["a", "b"]},
        {"name": "n", "type": "int64", "range": {"min": 0, "max": 10}},
        {"name": "x", "type": "float64", "scale": 4, "nullable": True, "range": {"min": 0}},
        {"name": "amount", "type": "decimal", "precision": 18, "scale": 2, "range": {"max": 100}},
        {"name": "when", "type": "timestamp", "resolution": "us"},
        {"name": "flag", "type": "bool", "nullable": True},
    ],
})  # fmt: skip
CLEAN = {
    "id": ["r1", "r2", "r3"], "kind": ["a", "b", "a"], "n": [0, 5, 10], "x": [0.0, None, 2.5],
    "amount": [Decimal("1.00"), Decimal("100.00"), Decimal("-3.50")], "when": [0, 1, 2], "flag": [True, None, False],
}  # fmt: skip
BROKEN = {
    "a null id": ("id", ["r1", None, "r3"]),
    "a kind not allowed": ("kind", ["a", "c", "a"]),
    "n above its range": ("n", [0, 11, 10]),
    "n below its range": ("n", [-1, 5, 10]),
    "a NaN": ("x", [0.0, math.nan, 2.5]),
    "x below its range": ("x", [0.0, -0.5, None]),
    "an amount above its range": ("amount", [Decimal("1.00"), Decimal("100.01"), Decimal("0")]),
    "a null time": ("when", [0, None, 2]),
}


def table(**changes: list[object]) -> pa.Table:
    columns = CLEAN | changes
    loose = pa.schema([pa.field(c.name, c.arrow_type, nullable=True) for c in CONTRACT.columns])
    arrays = {c.name: pa.array(columns[c.name], c.arrow_type if c.name != "when" else pa.int64()).cast(c.arrow_type) for c in CONTRACT.columns}
    return pa.table(arrays, schema=loose)


def pandera_failures(rows: pa.Table) -> int:
    try:
        pandera_schema(CONTRACT, unique=False).validate(to_frame(rows), lazy=True)
    except SchemaErrors as exc:
        return len(exc.failure_cases)
    return 0


def test_clean_rows_skip_pandera_and_pandera_agrees():
    rows = table()
    assert _surely_valid(rows, CONTRACT)
    assert pandera_failures(rows) == 0
    assert validate(rows, CONTRACT, unique=False).failures == ()


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_every_failure_pandera_finds_is_still_found(case):
    column, values = BROKEN[case]
    rows = table(**{column: values})
    assert not _surely_valid(rows, CONTRACT)
    report = validate(rows, CONTRACT, unique=False)
    assert report.failures and len(report.failures) == pandera_failures(rows)
    assert {f.column for f in report.failures} == {column} and all(f.row_index is not None for f in report.failures)
