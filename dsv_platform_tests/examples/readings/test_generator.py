"""The readings generator: deterministic batches with the quarter's late data, correction, replacement and DST change."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from dsv_platform.adapters.objects.landing import read_drop_file
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.readings import CONFIG_DIR, generator
from dsv_platform.examples.readings.landing import partition_days

SOURCES = load_config(CONFIG_DIR).sources


def test_batches_are_byte_identical_on_every_call():
    days = [dt.date(2026, 2, 10), dt.date(2026, 3, 29)]
    assert generator.initial_batches(days) == generator.initial_batches(days)
    assert generator.late_batch() == generator.late_batch() and generator.correction_batch() == generator.correction_batch()


def test_every_batch_parses_under_its_source_contract_without_rejections():
    for batch in [*generator.initial_batches([dt.date(2026, 1, 1), dt.date(2026, 2, 16)]), generator.late_batch(), generator.correction_batch()]:
        prepared = prepare_batch(batch.data, SOURCES[batch.source])
        assert prepared.rejected.num_rows == 0 and prepared.accepted.num_rows > 0, batch.file_name


def test_the_dst_day_has_23_local_hours_of_readings():
    assert len(generator.local_day_instants(generator.DST_DAY)) == 92
    assert len(generator.local_day_instants(dt.date(2026, 3, 28))) == 96
    assert generator.local_day_instants(dt.date(2026, 1, 1))[0] == dt.datetime(2025, 12, 31, 23, 0, tzinfo=dt.UTC)


def test_late_readings_arrive_after_the_quarter_and_within_ten_days_of_read_at():
    rows = prepare_batch(generator.late_batch().data, SOURCES["meter_readings"]).accepted.to_pylist()
    assert {r["meter_id"] for r in rows} == {generator.LATE_METER}
    lateness = [r["recorded_at"] - r["read_at"] for r in rows]
    assert max(lateness) <= dt.timedelta(days=10) and min(lateness) > dt.timedelta(0)
    assert all(r["recorded_at"] == generator.LATE_ARRIVAL for r in rows)


def test_the_replacement_hands_the_site_from_one_meter_to_the_next_at_one_instant():
    at = generator.REPLACED_AT
    serving = {m.meter_id for m in generator.METERS if m.site_id == "S-01" and m.reads_at(at)}
    before = {m.meter_id for m in generator.METERS if m.site_id == "S-01" and m.reads_at(at - generator.STEP)}
    assert (before, serving) == ({"m-001"}, {"m-101"})


def test_written_drop_files_read_back_as_the_same_batches(tmp_path):
    batches = [*generator.initial_batches([dt.date(2026, 3, 29)]), generator.correction_batch()]
    paths = generator.write_batches(tmp_path, batches)
    read = [read_drop_file(p, SOURCES) for p in paths]
    assert [replace(r, recorded_at=b.recorded_at) for r, b in zip(read, batches, strict=True) if r is not None] == batches  # recorded: when read


def test_partition_days_are_the_days_the_rows_touch():
    days = partition_days(generator.initial_batches([dt.date(2026, 1, 1), dt.date(2026, 3, 31)]), SOURCES)
    assert days == {
        "calibration": [dt.date(2025, 12, 1), dt.date(2026, 2, 1), dt.date(2026, 2, 16)],
        "meter_readings": [dt.date(2025, 12, 1), dt.date(2026, 1, 1), dt.date(2026, 3, 1)],
        "meters": [dt.date(2025, 12, 1), dt.date(2026, 2, 16)],
    }
