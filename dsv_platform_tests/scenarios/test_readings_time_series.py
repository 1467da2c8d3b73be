"""Issue 14, the time-series failure modes of the readings example, on the embedded stores (SQLite catalog and registry, local objects).

A week around the meter replacement and the DST change of 2026-03-29 is landed as the generator sends it, then late
readings and a correction arrive; readings_hourly:v1 is built after each. Expected values are computed here in plain
Python from the generator's readings (calibration factor, rounding per reading), never by the platform's code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from decimal import ROUND_HALF_EVEN, Decimal
from importlib import resources
from io import BytesIO
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.dataset_definition import parse_definition
from dsv_platform.core.config.timezones import check_tz_database, tz_database, zone
from dsv_platform.core.config_yaml import StrictLoader
from dsv_platform.core.errors import PublicationError
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.examples.readings import CONFIG_DIR, generator
from dsv_platform.examples.readings.landing import land_and_load
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.realization import build_realization
from dsv_platform.services.publication.realization_inputs import assemble, inputs_of
from dsv_platform.settings import load_settings

DAYS = [dt.date(2026, 2, 15), dt.date(2026, 2, 16), dt.date(2026, 2, 17), *(dt.date(2026, 3, d) for d in range(28, 32))]
MILLI = Decimal("0.001")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The platform, the definition and three realizations: as first known, after late readings, after a correction."""
    settings = load_settings({"DSV_CONFIG_DIR": str(CONFIG_DIR), "DSV_HOME": str(tmp_path_factory.mktemp("readings"))})
    with build_platform(settings) as platform:
        definition = platform.config.dataset("readings_hourly", "v1")
        land_and_load(platform, generator.initial_batches(DAYS))
        first = build_realization(platform, definition)
        land_and_load(platform, [generator.late_batch(DAYS)])
        late = build_realization(platform, definition)
        land_and_load(platform, [generator.correction_batch()])
        corrected = build_realization(platform, definition)
        yield platform, definition, {"first": first, "late": late, "corrected": corrected}


def _rows(platform, build) -> list[dict]:
    with open_dataset(platform, build.ref) as ds:
        assert ds.verify_content() == build.content_hash
        return ds.to_arrow().to_pylist()


def _calibrated(meter_id: str, at: dt.datetime, kwh: Decimal) -> Decimal:
    factor = max((d, f) for m, d, f in generator.CALIBRATIONS if m == meter_id and d <= at.date())[1]
    return (kwh * factor).quantize(MILLI, rounding=ROUND_HALF_EVEN)


def test_a_late_reading_after_publication_changes_a_new_realization_never_the_pinned_one(world):
    platform, _, builds = world
    first, late = builds["first"], builds["late"]
    assert late.manifest_hash != first.manifest_hash and late.content_hash != first.content_hash
    before, after = _rows(platform, first), _rows(platform, late)  # the pinned one re-read and re-hashed: unchanged
    assert not [r for r in before if r["meter_id"] == generator.LATE_METER and r["local_date"] >= generator.LATE_DAYS[0]]
    late_rows = [r for r in after if r["meter_id"] == generator.LATE_METER and r["local_date"] >= generator.LATE_DAYS[0]]
    assert len(late_rows) == 4 * 24 - 1  # four local days, one of them the 23-hour DST day
    assert [r for r in after if r not in late_rows] == before
    assert first.manifest.watermark < late.manifest.watermark == generator.LATE_ARRIVAL.isoformat()


def test_a_correction_is_visible_in_the_corrected_view_and_invisible_as_known_at_the_watermark(world):
    platform, _, builds = world
    meter_id, at = generator.CORRECTED
    spec = platform.config.sources["meter_readings"]
    key = (pc.field("meter_id") == meter_id) & (pc.field("read_at") == pa.scalar(at, pa.timestamp("us", tz="UTC")))
    latest = platform.tables.read(spec).filter(key).to_pylist()
    known = platform.tables.read(spec, as_of=dt.datetime.fromisoformat(builds["late"].manifest.watermark)).filter(key).to_pylist()
    original = generator.kwh_of(meter_id, at)
    assert [(r["kwh"], r["quality"]) for r in latest] == [(generator.CORRECTED_KWH, "corrected")]
    assert [r["kwh"] for r in known] == [original] != [generator.CORRECTED_KWH]
    hour = {b: next(r for r in _rows(platform, builds[b]) if r["meter_id"] == meter_id and r["hour_start"] == at) for b in ("late", "corrected")}
    delta = _calibrated(meter_id, at, generator.CORRECTED_KWH) - _calibrated(meter_id, at, original)
    assert hour["corrected"]["kwh"] - hour["late"]["kwh"] == delta != 0
    assert hour["late"]["local_hour"] == "2026-03-29T03:00" and hour["late"]["utc_offset_minutes"] == 120


def _fixed_offset_berlin() -> ZoneInfo:
    """A tzdata-like change: Europe/Berlin as if it had abolished DST (the TZif rules of Etc/GMT-1, under the Berlin name)."""
    data = resources.files("tzdata.zoneinfo.Etc").joinpath("GMT-1").read_bytes()
    return ZoneInfo.from_file(BytesIO(data), key="Europe/Berlin"), hashlib.sha256(data).hexdigest()


def test_the_dst_week_aggregates_the_same_with_the_recorded_tz_rules_and_differently_under_changed_rules(world):
    platform, definition, builds = world
    first = builds["first"]
    recorded = json.loads(first.manifest.parameters["tz_database"])
    assert recorded == tz_database(["Europe/Berlin"]) and check_tz_database(recorded) == []
    rows = _rows(platform, first)
    dst_day = [r for r in rows if r["meter_id"] == "m-002" and r["local_date"] == generator.DST_DAY]
    assert len(dst_day) == 23 and "2026-03-29T02:00" not in {r["local_hour"] for r in dst_day}
    assert {r["utc_offset_minutes"] for r in dst_day if r["local_hour"] < "2026-03-29T02:00"} == {60}
    assert {r["utc_offset_minutes"] for r in dst_day if r["local_hour"] > "2026-03-29T02:00"} == {120}

    inputs, pins, mark = inputs_of(platform.config, definition), {p.table: p for p in first.pins}, dt.datetime.fromisoformat(first.manifest.watermark)
    changed, changed_sha = _fixed_offset_berlin()
    other, _ = assemble(platform.tables, inputs, pins, mark, zone_of=lambda name: changed)
    assert check_tz_database({**recorded, "zones": {"Europe/Berlin": changed_sha}}) != []  # the record tells the rules apart
    after_change = [r for r in other.to_pylist() if r["meter_id"] == "m-002" and r["local_date"] == generator.DST_DAY]
    assert len(after_change) == 24 and {r["utc_offset_minutes"] for r in after_change} == {60}
    same, _ = assemble(platform.tables, inputs, pins, mark, zone_of=zone)  # the recorded rules: identical rows and hash
    assert same.to_pylist() == sorted(rows, key=lambda r: (r["meter_id"], r["hour_start"]))
    assert hash_table(same, definition.contract, partition_by=definition.contract.partition_by).content_hash == first.content_hash


def test_the_meter_replacement_keeps_the_site_history_joined(world):
    platform, _, builds = world
    rows = [r for r in _rows(platform, builds["first"]) if r["site_id"] == "S-01"]
    assert {r["meter_id"] for r in rows} == {"m-001", "m-101"} and {r["region"] for r in rows} == {"north"}
    old = max(r["hour_start"] for r in rows if r["meter_id"] == "m-001")
    new = min(r["hour_start"] for r in rows if r["meter_id"] == "m-101")
    assert old + dt.timedelta(hours=1) == new == generator.REPLACED_AT
    expected = sum(
        _calibrated(m.meter_id, at, generator.kwh_of(m.meter_id, at))
        for day in DAYS
        for at in generator.local_day_instants(day)
        for m in generator.METERS
        if m.site_id == "S-01" and m.reads_at(at)
    )
    assert sum(r["kwh"] for r in rows) == expected
    assert all(r["kwh"] is not None for r in rows)


def test_no_split_policy_publishes_no_split_assignment(world):
    _, definition, builds = world
    assert definition.split_policy is None and builds["first"].manifest.splits is None and builds["first"].split_counts == {}
    assert {g.name for g in builds["first"].gates} >= {"rows_at_least"} and all(g.passed for g in builds["first"].gates if g.blocking)
    assert dataclasses.replace(definition, aggregate=None).transform_outputs == ("kwh_calibrated",)


def test_computed_rows_outside_the_output_contract_block_publication(world):
    """Pandera checks the aggregated rows against the output contract: four readings an hour breaks a 'max 3' range."""
    platform, _, _ = world
    path = CONFIG_DIR / "datasets" / "readings_hourly_v1.yaml"
    text = path.read_text(encoding="utf-8").replace("range: {min: 0, max: 4}", "range: {min: 0, max: 3}").replace("version: v1", "version: v2")
    narrow = parse_definition(yaml.load(text, Loader=StrictLoader), source=path)
    with pytest.raises(PublicationError, match="rows_satisfy_contract"):
        build_realization(platform, narrow)
