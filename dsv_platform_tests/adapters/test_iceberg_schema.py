"""Schema evolution of a canonical table through pyiceberg (adapters/iceberg/iceberg_schema.py), on real SQLite and PostgreSQL catalogs.

A snapshot pinned before a change reads by field id through the current schema (a renamed column under
its new name, an added one null, a widened one widened), a table that records no contract yet is read
back from its Iceberg schema, and the audit detail of an evolution is canonical JSON.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal

import pyarrow as pa
import pytest

from dsv_platform.adapters.iceberg.iceberg_schema import CONTRACT_PROPERTY, evolve_schema, recorded_contract
from dsv_platform.bootstrap import build_tables
from dsv_platform.core import canonical_json
from dsv_platform.core.config.source import DerivedTableSpec
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.contracts.table_evolution import SchemaEvolutionError
from dsv_platform_tests.defs.support import settings_at

DAY = dt.date(2026, 6, 1)
AT = dt.datetime(2026, 6, 2, tzinfo=dt.UTC)
COLUMNS = [
    {"name": "id", "type": "string"},
    {"name": "day", "type": "date"},
    {"name": "n", "type": "int32"},
    {"name": "kwh", "type": "decimal", "precision": 12, "scale": 3},
    {"name": "site", "type": "string", "nullable": True},
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def tables(request, tmp_path):
    settings = settings_at(tmp_path)
    if request.param == "postgres":
        settings = dataclasses.replace(settings, iceberg_catalog_url=request.getfixturevalue("postgres_url"))
    return build_tables(settings)


def _spec(columns: list[dict[str, object]]) -> DerivedTableSpec:
    return DerivedTableSpec("m", parse_contract({"name": "m", "key": ["id"], "partition_by": "day", "columns": columns}))


def _evolved() -> list[dict[str, object]]:
    cols = [dict(c) for c in COLUMNS]
    cols[2]["type"] = "int64"
    cols[3]["precision"] = 14
    cols[4] = {"name": "location", "type": "string", "nullable": True, "renamed_from": "site"}
    return [*cols, {"name": "quality", "type": "string", "nullable": True, "range": {"min": "a"}}]


def _land(tables, spec, rows: dict[str, list[object]], batch: str, at: dt.datetime = AT):
    return tables.append(spec, pa.table(rows), recorded_at=at, batch=batch)


def test_a_pinned_snapshot_reads_by_field_id_through_the_current_schema(tables):
    old = _spec(COLUMNS)
    first = _land(tables, old, {"id": ["a"], "day": [DAY], "n": [1], "kwh": [decimal.Decimal("1.5")], "site": ["north"]}, "b1")
    new = _spec(_evolved())
    change = evolve_schema(tables, new)
    assert change is not None and {c.kind.value for c in change.changes} == {"widening", "rename", "additive"}
    canonical_json.dumps(change.to_document())  # the audit detail: canonical JSON
    row = {"id": ["b"], "day": [DAY], "n": [2**40], "kwh": [decimal.Decimal("12345678901.5")], "location": ["south"], "quality": ["ok"]}
    _land(tables, new, row, "b2", AT + dt.timedelta(hours=1))
    pinned = tables.read(new, snapshot_id=first.snapshot_id, partition=DAY)
    assert pinned.to_pylist() == [{"id": "a", "day": DAY, "n": 1, "kwh": decimal.Decimal("1.500"), "location": "north", "quality": None}]
    history = tables.read(new, snapshot_id=first.snapshot_id, history=True, columns=("location",))
    assert history.column("location").to_pylist() == ["north"]
    assert sorted(tables.read(new).column("location").to_pylist()) == ["north", "south"]
    assert evolve_schema(tables, new) is None, "evolved once"


def test_a_table_that_records_no_contract_is_read_back_from_its_iceberg_schema(tables):
    old = _spec(COLUMNS)
    _land(tables, old, {"id": ["a"], "day": [DAY], "n": [1], "kwh": [decimal.Decimal("1.5")], "site": [None]}, "b1")
    assert CONTRACT_PROPERTY not in tables.load("m").properties, "a table made by an append before this change"
    assert recorded_contract(tables.load("m"), old.contract) == old.contract
    narrowed = [dict(c) for c in COLUMNS]
    narrowed[2]["type"] = "int16"  # the same Iceberg 'int': nothing to tell apart, nothing to change
    assert evolve_schema(tables, _spec(narrowed)) is None
    assert CONTRACT_PROPERTY in tables.load("m").properties
    with pytest.raises(SchemaEvolutionError, match=r"column n: narrowing int16 -> int8"):
        evolve_schema(tables, _spec([*narrowed[:2], {"name": "n", "type": "int8"}, *narrowed[3:]]))
    tables.load("m").transaction().set_properties({CONTRACT_PROPERTY: "{not json"}).commit_transaction()
    assert recorded_contract(tables.load("m"), old.contract) == old.contract, "an unreadable record: read back from the schema"
    change = evolve_schema(tables, _spec([*COLUMNS, {"name": "quality", "type": "string", "nullable": True}]))
    assert change is not None and [c.describe() for c in change.changes] == ["quality: additive none -> string"]


def test_a_refused_change_leaves_the_table_and_its_record_unchanged(tables):
    old = _spec(COLUMNS)
    _land(tables, old, {"id": ["a"], "day": [DAY], "n": [1], "kwh": [decimal.Decimal("1.5")], "site": [None]}, "b1")
    evolve_schema(tables, old)
    before = tables.load("m")
    scale = [dict(c) for c in COLUMNS]
    scale[3] = {"name": "kwh", "type": "decimal", "precision": 14, "scale": 4}  # pyiceberg 0.12 would take it; the Iceberg spec does not
    with pytest.raises(SchemaEvolutionError, match=r"Iceberg cannot widen decimal\(12, 3\) to decimal\(14, 4\)"):
        evolve_schema(tables, _spec(scale))
    with pytest.raises(SchemaEvolutionError, match=r"column site: nullability nullable -> required.*keep it 'nullable: true'"):
        evolve_schema(tables, _spec([*COLUMNS[:4], {"name": "site", "type": "string"}]))
    after = tables.load("m")
    assert after.schema() == before.schema() and after.properties == before.properties
