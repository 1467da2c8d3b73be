"""Metadata tables as the UI renders them: typed columns, and integers the browser would round kept exact as text."""

from __future__ import annotations

import datetime as dt

from dsv_platform.defs.metadata import JS_SAFE_INT, table


def test_columns_are_typed_by_their_values() -> None:
    value = table(["name", "rows", "ratio", "ok", "day"], [("a", 3, 0.5, True, dt.date(2026, 6, 1)), ("b", None, 1.0, False, None)])
    types = {c.name: c.type for c in value.schema.columns}
    assert types == {"name": "string", "rows": "int", "ratio": "float", "ok": "bool", "day": "string"}
    assert value.records[0].data == {"name": "a", "rows": 3, "ratio": 0.5, "ok": True, "day": "2026-06-01"}


def test_an_iceberg_snapshot_id_past_2_53_stays_exact() -> None:
    """6393361948492118582 read as a JavaScript number shows 6393361948492119000: it goes out as its digits."""
    value = table(["table", "snapshot id"], [("transactions", 6393361948492118582), ("labels", 12)])
    assert {c.name: c.type for c in value.schema.columns}["snapshot id"] == "string"
    assert [r.data["snapshot id"] for r in value.records] == ["6393361948492118582", "12"]
    small = table(["n"], [(JS_SAFE_INT,), (-JS_SAFE_INT,)])
    assert small.schema.columns[0].type == "int" and [r.data["n"] for r in small.records] == [JS_SAFE_INT, -JS_SAFE_INT]


def test_past_the_limit_the_first_column_says_how_many_are_shown() -> None:
    value = table(["i"], [(i,) for i in range(7)], limit=5)
    assert len(value.records) == 5 and value.schema.columns[0].description == "first 5 of 7 rows shown"
