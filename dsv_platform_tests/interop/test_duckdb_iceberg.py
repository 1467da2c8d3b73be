"""Our canonical tables are plain Iceberg: DuckDB's iceberg extension (loaded offline from its wheel) reads what pyiceberg reads."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dsv_platform.adapters.iceberg import duckdb_iceberg as di
from dsv_platform.examples.fraud.events import daily_batch, late_transactions
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World

DAYS = 3


def normalized(table: pa.Table) -> pa.Table:
    """Rows sorted on every column; large strings as strings and every field nullable (pyiceberg and DuckDB differ only there)."""
    fields = [pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type) for f in table.schema]
    table = table.cast(pa.schema(fields))
    return table.sort_by([(name, "ascending") for name in table.column_names])


def pyiceberg_rows(world: World, name: str, snapshot_id: int | None = None) -> pa.Table:
    return world.tables.load(name).scan(snapshot_id=snapshot_id).to_arrow()


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]:
    """A fraud world with one published realization, the pinned rows as pyiceberg read them then, and a later day and correction appended."""
    world = World.create(tmp_path_factory.mktemp("duckdb"), days=DAYS, rows_per_day=30)
    build = world.build()
    pins = [(p.table, p.snapshot_id, p.tag) for p in build.pins]
    before = {table: pyiceberg_rows(world, table, sid) for table, sid, _ in pins}
    later = world.domain.days(DAYS + 1)[-1]
    first = world.domain.days(1)[0]
    world.ingest([daily_batch(world.domain, s, later) for s in SOURCES] + [late_transactions(world.domain, first, arrived=later, count=4)])
    return world, before, pins


def test_extensions_load_from_the_wheels_with_autoinstall_off() -> None:
    con = di.connect()
    settings = dict(con.sql("SELECT name, value FROM duckdb_settings() WHERE name LIKE 'auto%_known_extensions'").fetchall())
    assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    loaded = dict(con.sql("SELECT extension_name, install_path FROM duckdb_extensions() WHERE loaded").fetchall())
    assert {"avro", "iceberg"} <= set(loaded)
    assert di.extension_path("iceberg").is_file() and "site-packages" in str(di.extension_path("iceberg"))


def test_every_canonical_table_reads_the_same_in_duckdb(pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]) -> None:
    world, _, _ = pinned
    names = world.tables.table_names()
    assert {"transactions", "chargebacks", "account_features", "labels_fraud_v5", "labels_fraud_v6"} <= set(names)
    con = di.connect()
    nonempty = 0
    for name in names:
        ours = pyiceberg_rows(world, name)
        theirs = di.read_arrow(con, di.table_location(world.tables, name))
        assert theirs.column_names == ours.column_names, name
        assert normalized(theirs).equals(normalized(ours)), f"{name}: DuckDB and pyiceberg rows differ"
        nonempty += ours.num_rows > 0
    assert nonempty >= 4
    tx = di.read_arrow(con, di.table_location(world.tables, "transactions"))
    assert tx.schema.field("amount").type == pa.decimal128(18, 2)
    assert tx.schema.field("_recorded_at").type == pa.timestamp("us", tz="UTC")


def test_pinned_snapshot_by_id_and_by_tag_returns_the_old_rows(pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]) -> None:
    world, before, pins = pinned
    con = di.connect()
    changed = 0
    for table, snapshot_id, tag in pins:
        by_id = di.read_arrow(con, di.table_location(world.tables, table, snapshot_id=snapshot_id))
        by_tag_location = di.table_location(world.tables, table, ref=tag)
        assert by_tag_location.snapshot_id == snapshot_id, "the tag in the metadata JSON names the pinned snapshot"
        by_tag = di.read_arrow(con, by_tag_location)
        assert normalized(by_id).equals(normalized(before[table])), f"{table}@{snapshot_id}: DuckDB differs from the rows pinned at build time"
        assert normalized(by_tag).equals(normalized(by_id))
        current = di.read_arrow(con, di.table_location(world.tables, table))
        if not normalized(current).equals(normalized(by_id)):
            changed += 1
            assert current.num_rows > by_id.num_rows, "the later appends only add rows"
    assert changed >= 2, "the later day and the correction moved the tables past their pins"


def test_the_later_day_and_late_events_are_visible_only_after_the_pin(pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]) -> None:
    world, _, pins = pinned
    con = di.connect()
    snapshot_id = next(sid for table, sid, _ in pins if table == "transactions")
    at_pin = di.table_location(world.tables, "transactions", snapshot_id=snapshot_id).scan_sql()
    now = di.table_location(world.tables, "transactions").scan_sql()
    first, later = world.domain.days(1)[0], world.domain.days(DAYS + 1)[-1]

    def count(scan: str, day: object) -> int:
        row = con.sql(f"SELECT count(*) FROM {scan} WHERE event_date = DATE '{day}'").fetchone()
        assert row is not None
        return int(row[0])

    assert (count(at_pin, later), count(now, later)) == (0, 30), "the later day exists only after the pin"
    assert count(now, first) == count(at_pin, first) + 4, "the 4 late events of the first day exist only after the pin"


def test_as_known_at_in_sql_is_our_bitemporal_read(pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]) -> None:
    world, _, _ = pinned
    spec = world.platform.config.sources["transactions"]
    history = world.tables.read(spec, history=True).column("_recorded_at").to_pylist()
    as_of = sorted(set(history))[-2]  # before the late events and the later day
    key = ", ".join(spec.contract.key)
    scan = di.table_location(world.tables, spec.name).scan_sql()
    sql = (f"SELECT {', '.join(spec.contract.column_names)} FROM {scan} WHERE _recorded_at <= TIMESTAMPTZ '{as_of.isoformat()}' "
           f"QUALIFY row_number() OVER (PARTITION BY {key} ORDER BY _recorded_at DESC, _batch DESC) = 1")  # fmt: skip
    ours = world.tables.read(spec, as_of=as_of)
    theirs = di.connect().sql(sql).to_arrow_table()
    assert 0 < ours.num_rows < world.tables.read(spec).num_rows
    assert normalized(theirs).equals(normalized(ours))


def test_unknown_table_and_tag_are_typed_errors(pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]]) -> None:
    world, _, _ = pinned
    with pytest.raises(di.NotFoundError, match="no canonical table 'nope'"):
        di.table_location(world.tables, "nope")
    with pytest.raises(di.NotFoundError, match="no ref 'missing-tag'"):
        di.table_location(world.tables, "transactions", ref="missing-tag")


def test_dsv_table_location_prints_the_query_a_user_types(
    pinned: tuple[World, dict[str, pa.Table], list[tuple[str, int, str]]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    world, _, pins = pinned
    table, snapshot_id, tag = pins[0]
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(world.settings.home)})  # in process
    out = dsv("table-location", table, "--tag", tag, "--json")
    assert out.code == 0, out.err
    doc = json.loads(out.out)
    assert doc["snapshot_id"] == snapshot_id and f"snapshot_from_id={snapshot_id}" in doc["query"]
    rows = di.connect().sql(doc["query"]).to_arrow_table()
    assert normalized(rows).equals(normalized(pyiceberg_rows(world, table, snapshot_id)))
    missing = dsv("table-location", "nope")
    assert missing.code == 3 and missing.err.startswith("dsv: error:") and "Traceback" not in missing.err
