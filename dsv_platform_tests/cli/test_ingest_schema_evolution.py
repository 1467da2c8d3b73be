"""Issue 23 item 3: a source contract that changes after data has landed evolves its canonical table, or is refused in one line.

Before: adding a nullable column to a source contract made the next ``dsv ingest`` fail with
``KeyError: 'Field "quality" does not exist in schema'`` and a traceback. Each compatible change is run end
to end (land, change the YAML contract, land again, build, the realization built before still verifies),
each breaking change is refused with its ``dsv schema diff`` classification and exit 9 before anything lands.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.core.errors import FailureKind
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result, run_dsv

SOURCE = """\
name: readings
key: [reading_id]
partition_by: day
landing: {format: csv}
valid_time: day
entity: meter_id
columns:
  - {name: reading_id, type: string}
  - {name: meter_id, type: string}
  - {name: day, type: date}
  - {name: pulses, type: int32}
  - {name: temp, type: float32, scale: 1}
  - {name: kwh, type: decimal, precision: 12, scale: 3}
  - {name: site, type: string, nullable: true}
"""

DATASET = """\
name: daily
version: v1
base: readings
observation_window: {column: day, start: "2026-06-01", end: "2026-06-30"}
watermark: {rule: latest_recorded}
gates: {rows_at_least: 1}
seed: 1
contract:
  name: daily
  key: [reading_id]
  partition_by: day
  columns:
    - {name: reading_id, type: string}
    - {name: meter_id, type: string}
    - {name: day, type: date}
    - {name: kwh, type: decimal, precision: 12, scale: 3}
"""

HEADER = "reading_id,meter_id,day,pulses,temp,kwh,site"
FIRST = ["r1,m1,2026-06-01,10,20.5,1.250,north", "r2,m2,2026-06-01,11,21.0,2.500,"]


class World:
    def __init__(self, tmp_path: Path, dsv: DsvCli) -> None:
        self.root, self.dsv = tmp_path, dsv
        self.config = tmp_path / "config"
        (self.config / "sources").mkdir(parents=True)
        (self.config / "datasets").mkdir()
        (self.config / "platform.yaml").write_text('partitions: {start: "2026-06-01"}\n')
        self.source(SOURCE)
        (self.config / "datasets" / "daily_v1.yaml").write_text(DATASET)

    def source(self, text: str) -> None:
        (self.config / "sources" / "readings.yaml").write_text(text)

    def ingest(self, name: str, header: str, rows: list[str], *options: str) -> Result:
        batch = self.root / name
        batch.write_text("\n".join([header, *rows]) + "\n")
        return self.dsv("ingest", "readings", str(batch), *options)

    def build(self) -> dict[str, object]:
        done = self.dsv("build", "daily:v1", "--json")
        assert done.code == 0, done.err
        return dict(json.loads(done.out))

    def stored(self) -> list[Path]:
        """The stored objects (raw batches among them) and the Dagster runs' folders."""
        home = self.root / "home"
        return sorted(p for top in ("objects", "dagster/history") for p in (home / top).rglob("*"))

    def verify(self, ref: object) -> Result:
        return self.dsv("verify", str(ref), "--json")


@pytest.fixture
def world(tmp_path, capsys, monkeypatch) -> World:
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(tmp_path / "config")})
    w = World(tmp_path, dsv)
    first = w.ingest("first.csv", HEADER, FIRST)
    assert first.code == 0, first.err
    return w


def _changed(*replacements: tuple[str, str]) -> str:
    text = SOURCE
    for old, new in replacements:
        assert old in text
        text = text.replace(old, new)
    return text


SITE = "  - {name: site, type: string, nullable: true}\n"
QUALITY = SITE + "  - {name: quality, type: string, nullable: true}\n"
NEW_ROW = "r3,m1,2026-06-02,12,19.5,3.000,south"
RENAMED = "{name: location, type: string, nullable: true, renamed_from: site}"
COMPATIBLE = {  # the change to the YAML contract, the second batch's header and row
    "added nullable column": ([(SITE, QUALITY)], f"{HEADER},quality", f"{NEW_ROW},good"),
    "int32 -> int64": ([("{name: pulses, type: int32}", "{name: pulses, type: int64}")], HEADER, "r3,m1,2026-06-02,5000000000,19.5,3.000,"),
    "float32 -> float64": ([("{name: temp, type: float32, scale: 1}", "{name: temp, type: float64, scale: 2}")], HEADER, "r3,m1,2026-06-02,12,19.25,3.000,"),
    "decimal precision": ([("precision: 12, scale: 3}", "precision: 16, scale: 3}")], HEADER, NEW_ROW),
    "renamed_from": ([(SITE.strip()[2:], RENAMED)], HEADER.replace(",site", ",location"), NEW_ROW),
}


@pytest.mark.parametrize("change", sorted(COMPATIBLE))
def test_a_compatible_change_evolves_the_table_and_the_old_realization_still_verifies(world: World, change: str) -> None:
    replacements, header, row = COMPATIBLE[change]
    before = world.build()
    world.source(_changed(*replacements))
    landed = world.ingest("second.csv", header, [row])
    assert landed.code == 0, landed.err
    assert "  schema of canonical.readings evolved (audited as schema_evolved): " in landed.out, landed.out
    after = world.build()
    assert after["rows"] == 3 and after["manifest_hash"] != before["manifest_hash"]
    old = world.verify(before["ref"])
    assert old.code == 0, old.err
    assert json.loads(old.out)["content_hash"] == before["content_hash"]
    audit = world.dsv("audit", "--ref", "canonical:readings", "--json")
    assert audit.code == 0, audit.err
    [entry] = [e for e in json.loads(audit.out) if e["action"] == "schema_evolved"]
    assert entry["identity"] and entry["detail"]["schema_after"] == entry["detail"]["schema_before"] + 1
    kinds = {c["kind"] for c in entry["detail"]["changes"]}
    assert kinds == {"added nullable column": {"additive"}, "renamed_from": {"rename"}}.get(change, {"widening"}), entry


def test_rows_landed_before_an_added_column_read_null_and_duckdb_reads_both_snapshots(world: World) -> None:
    before = world.build()
    pins = world.dsv("table-location", "readings", "--json")
    old_snapshot = json.loads(pins.out)["metadata_location"]
    world.source(_changed(("  - {name: site, type: string, nullable: true}\n", QUALITY)))
    assert world.ingest("second.csv", f"{HEADER},quality", ["r3,m1,2026-06-02,12,19.5,3.000,south,good"]).code == 0
    import duckdb  # noqa: F401  (the interop extra; dsv table-location's query runs in DuckDB)

    from dsv_platform.adapters.iceberg.duckdb_iceberg import connect

    current = json.loads(world.dsv("table-location", "readings", "--json").out)
    rows = {r["reading_id"]: r for r in connect().sql(current["query"]).to_arrow_table().to_pylist()}
    assert (rows["r1"]["quality"], rows["r3"]["quality"]) == (None, "good")
    old = connect().sql(f"SELECT * FROM iceberg_scan('{old_snapshot}')").to_arrow_table()
    assert "quality" not in old.column_names and old.num_rows == 2
    assert world.verify(before["ref"]).code == 0


BREAKING = {  # the change, how the refusal names it, what it says to do
    "removed column": ([(SITE, "")], "column site: removal string -> none", "declare 'site' again"),
    "narrowing": ([("{name: pulses, type: int32}", "{name: pulses, type: int16}")], "column pulses: narrowing int32 -> int16", "keep int32"),
    "nullable -> required": ([(SITE, SITE.replace(", nullable: true", ""))], "nullability nullable -> required", "keep it 'nullable: true'"),
    "type change": ([("{name: pulses, type: int32}", "{name: pulses, type: string}")], "column pulses: type_change int32 -> string", "keep the type"),
    "required column added": ([(SITE, SITE + "  - {name: q, type: string}\n")], "column q: additive none -> string", "declare it 'nullable: true'"),
    "decimal scale": ([("precision: 12, scale: 3}", "precision: 13, scale: 4}")], "cannot widen decimal(12, 3) to decimal(13, 4)", "keep decimal(12, 3)"),
}


@pytest.mark.parametrize("change", sorted(BREAKING))
def test_a_breaking_change_is_refused_before_anything_lands(world: World, change: str) -> None:
    replacements, named, advice = BREAKING[change]
    world.source(_changed(*replacements))
    stored = world.stored()
    refused = world.ingest("second.csv", HEADER, ["r3,m1,2026-06-02,12,19.5,3.000,south"])
    assert refused.code == FailureKind.BREAKING.exit_code == 9, refused.err
    [line] = refused.err.strip().splitlines()
    assert line.startswith("dsv: error: ") and "source readings" in line and named in line and advice in line, line
    assert "Traceback" not in refused.err and "KeyError" not in refused.err
    assert world.stored() == stored, "nothing landed, no run started"
    world.source(SOURCE)  # the old contract still loads
    assert world.ingest("third.csv", HEADER, ["r4,m1,2026-06-02,12,19.5,3.000,south"]).code == 0


def test_the_refusal_is_one_line_from_the_real_process(tmp_path: Path, world: World) -> None:
    world.source(_changed(("  - {name: site, type: string, nullable: true}\n", "")))
    batch = tmp_path / "second.csv"
    batch.write_text(f"{HEADER}\nr3,m1,2026-06-02,12,19.5,3.000,south\n")
    done = run_dsv(world.dsv.env, "ingest", "readings", str(batch))
    assert done.returncode == 9 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "removal string -> none" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("change", ["added nullable column", "renamed_from"])
def test_a_realization_built_before_the_change_rebuilds_from_raw_after_it(world: World, change: str) -> None:
    """`dsv reproduce`'s last resort replays every raw batch under the source's current contract, the batches landed
    before the change among them (without the added column, under the column's old name)."""
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.services.publication.datasets import load_manifest
    from dsv_platform.services.reproduction.raw_rebuild import rebuild_from_raw
    from dsv_platform.settings import load_settings

    replacements, header, row = COMPATIBLE[change]
    before = world.build()
    world.source(_changed(*replacements))
    assert world.ingest("second.csv", header, [row]).code == 0
    with build_platform(load_settings(dict(world.dsv.env))) as platform:
        realization = platform.registry.find_by_manifest_hash(str(before["manifest_hash"]))
        assert realization is not None
        rebuilt = rebuild_from_raw(platform, load_manifest(platform.registry, realization), workdir=world.root / "scratch")
    assert rebuilt.content_hash == before["content_hash"] and rebuilt.batches == 1


def test_a_batch_on_a_day_that_already_has_rows_loads_beside_them(world: World) -> None:
    """The load of a day re-reads every batch landed on it, those from before the change among them."""
    world.source(_changed((SITE, QUALITY)))
    landed = world.ingest("second.csv", f"{HEADER},quality", ["r3,m1,2026-06-01,12,19.5,3.000,south,good"], "--json")
    assert landed.code == 0, landed.err
    assert [(c["column"], c["kind"]) for c in json.loads(landed.out)["schema_changes"]] == [("quality", "additive")]
    again = world.ingest("third.csv", f"{HEADER},quality", ["r4,m1,2026-06-01,12,19.5,3.000,south,"])
    assert again.code == 0 and "evolved" not in again.out, again.out
    assert world.build()["rows"] == 4


def test_a_load_inside_dagster_refuses_a_breaking_change_the_same_way(world: World) -> None:
    """A sensor, a backfill or the UI loads without `dsv ingest`'s check: the load itself refuses, the table unchanged."""
    import datetime as dt

    from dsv_platform.bootstrap import build_platform
    from dsv_platform.core.contracts.table_evolution import SchemaEvolutionError
    from dsv_platform.services.ingest.canonical_load import load_partition
    from dsv_platform.settings import load_settings

    world.source(_changed(("{name: pulses, type: int32}", "{name: pulses, type: string}")))
    with build_platform(load_settings(dict(world.dsv.env))) as platform:
        spec = platform.config.sources["readings"]
        before = platform.tables.load("readings").metadata_location
        with pytest.raises(SchemaEvolutionError, match=r"column pulses: type_change int32 -> string") as refused:
            load_partition(platform, spec, dt.date(2026, 6, 1))
        assert refused.value.exit_code == 9 and platform.tables.load("readings").metadata_location == before
