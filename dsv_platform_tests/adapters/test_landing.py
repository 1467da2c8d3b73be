import datetime as dt
import os

import pyarrow as pa
import pytest

from dsv_platform.adapters.objects.landing import LandingError, LandingStatus, drop_file_problem, read_drop_file
from dsv_platform.bootstrap import build_landing
from dsv_platform.core.config.source import parse_source
from dsv_platform.core.config_yaml import read_yaml
from dsv_platform.core.ingest.batch import RawBatch, batch_file_name, batch_of
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES, TRANSACTIONS
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=200)
DAY = DOMAIN.start + dt.timedelta(days=1)
AT = dt.datetime(2026, 1, 5, 3, tzinfo=dt.UTC)


@pytest.fixture
def zone(tmp_path):
    return build_landing(settings_at(tmp_path / "home"))


@pytest.fixture
def meters(tmp_path):
    folder = write_config(tmp_path / "config")
    specs = {}
    for name in ("meters", "calibration"):
        path = folder / "sources" / f"{name}.yaml"
        specs[name] = parse_source(read_yaml(path), file=path)
    return specs


def readings(days: list[int]) -> pa.Table:
    return pa.table(
        {
            "reading_id": pa.array([f"r{i}" for i in range(len(days))], pa.string()),
            "meter_id": pa.array([f"m{i % 2}" for i in range(len(days))], pa.string()),
            "read_at": pa.array([dt.datetime(2026, 1, d, 12, tzinfo=dt.UTC) for d in days], pa.timestamp("us", tz="UTC")),
            "read_day": pa.array([dt.date(2026, 1, d) for d in days], pa.date32()),
            "kwh_total": pa.array(["1.250", "2.500", "3.000", "4.125"][: len(days)], pa.string()),
            "site": pa.array([None] * len(days), pa.string()),
        }
    )


def test_identical_bytes_land_once(zone):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    first = zone.land(batch, TRANSACTIONS)
    assert first.status is LandingStatus.LANDED and first.rows == 200
    assert zone.read(first) == batch.data
    again = zone.land(batch, TRANSACTIONS)
    assert again.status is LandingStatus.UNCHANGED and again.digest == first.digest
    assert len(zone.records("transactions", DAY)) == 1


def test_different_bytes_for_a_batch_id_are_a_new_object_never_an_overwrite(zone):
    first = zone.land(events.daily_batch(DOMAIN, "transactions", DAY), TRANSACTIONS)
    revised = zone.land(events.renamed_column_batch(DOMAIN, DAY), TRANSACTIONS)
    assert revised.status is LandingStatus.REVISED and revised.digest != first.digest
    assert zone.store.exists(first.digest) and zone.store.exists(revised.digest)
    assert [r.digest for r in zone.loadable("transactions", DAY)] == [first.digest, revised.digest]


def test_malformed_batch_is_quarantined_with_the_reason(zone):
    record = zone.land(events.garbled_batch(DAY), TRANSACTIONS)
    assert record.status is LandingStatus.QUARANTINED and "CSV" in record.reason and record.day == DAY
    assert zone.store.exists(record.digest)  # raw is kept
    assert zone.loadable("transactions", DAY) == []
    assert zone.land(events.garbled_batch(DAY), TRANSACTIONS).status is LandingStatus.QUARANTINED


def test_a_batch_of_another_source_or_format_is_refused(zone):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    with pytest.raises(LandingError, match="cannot land as source"):
        zone.land(RawBatch("payments", DAY, "daily", batch.recorded_at, batch.data), TRANSACTIONS)
    with pytest.raises(LandingError, match="lands csv"):
        zone.land(RawBatch("transactions", DAY, "daily", batch.recorded_at, batch.data, "parquet"), TRANSACTIONS)


def test_drop_file_becomes_a_batch(tmp_path):
    batch = events.daily_batch(DOMAIN, "chargebacks", DAY)
    path = tmp_path / batch_file_name("chargebacks", DAY, "manual-1")
    path.write_bytes(batch.data)
    os.utime(path, (1_800_000_000, 1_800_000_000))  # 2027: whoever writes the file sets its modification time
    before = dt.datetime.now(dt.UTC)
    read = read_drop_file(path, SOURCES)
    assert (read.source, read.day, read.batch_id, read.data, read.format) == ("chargebacks", DAY, "manual-1", batch.data, "csv")
    assert before <= read.recorded_at <= dt.datetime.now(dt.UTC), "the platform's clock, never the file's modification time"
    assert read_drop_file(tmp_path / "README.csv", SOURCES) is None


def test_a_drop_file_in_another_format_than_its_source_lands_is_refused_with_the_reason(tmp_path, meters):
    wrong = tmp_path / batch_file_name("transactions", DAY, "b1", "parquet")
    wrong.write_bytes(b"PAR1")
    assert read_drop_file(wrong, SOURCES) is None
    assert "lands csv files, not parquet" in drop_file_problem(wrong, SOURCES)
    right = tmp_path / batch_file_name("meters", DAY, "b1", "parquet")
    right.write_bytes(b"PAR1")
    assert read_drop_file(right, meters).format == "parquet"
    assert "unknown source" in drop_file_problem(right, SOURCES)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_parquet_and_jsonl_batches_land_and_are_read_by_the_source_format(zone, meters, fmt):
    spec = meters["meters"]
    if fmt == "jsonl":
        spec = type(spec)(**{**spec.__dict__, "landing_format": "jsonl"})
    batch = batch_of(readings([3, 3]), source="meters", day=dt.date(2026, 1, 3), batch_id="b1", recorded_at=AT, fmt=fmt)
    record = zone.land(batch, spec)
    assert (record.status, record.rows, record.day) == (LandingStatus.LANDED, 2, dt.date(2026, 1, 3))
    assert zone.land(batch, spec).status is LandingStatus.UNCHANGED


def test_a_multi_day_batch_is_indexed_once_per_partition_day_it_touches(zone, meters):
    spec = meters["meters"]
    batch = batch_of(readings([3, 4, 4, 6]), source="meters", day=dt.date(2026, 1, 4), batch_id="b1", recorded_at=AT, fmt="parquet")
    records = zone.land_all(batch, spec)
    assert [(r.day, r.rows, r.status) for r in records] == [
        (dt.date(2026, 1, 4), 2, LandingStatus.LANDED),
        (dt.date(2026, 1, 3), 1, LandingStatus.LANDED),
        (dt.date(2026, 1, 6), 1, LandingStatus.LANDED),
    ]
    assert {r.digest for r in records} == {records[0].digest} and {r.batch_id for r in records} == {"b1"}
    assert [r.status for r in zone.land_all(batch, spec)] == [LandingStatus.UNCHANGED] * 3
    assert len(zone.records("meters")) == 3 and [r.day for r in zone.loadable("meters", dt.date(2026, 1, 6))] == [dt.date(2026, 1, 6)]
    revised = batch_of(readings([3, 4]), source="meters", day=dt.date(2026, 1, 4), batch_id="b1", recorded_at=AT, fmt="parquet")
    again = zone.land_all(revised, spec)
    assert [(r.day, r.status) for r in again] == [(dt.date(2026, 1, 4), LandingStatus.REVISED), (dt.date(2026, 1, 3), LandingStatus.REVISED)]


def test_a_malformed_parquet_batch_is_quarantined_under_its_day(zone, meters):
    record = zone.land(RawBatch("meters", dt.date(2026, 1, 9), "b1", AT, b"not parquet", "parquet"), meters["meters"])
    assert (record.status, record.day) == (LandingStatus.QUARANTINED, dt.date(2026, 1, 9)) and "Parquet" in record.reason


def test_land_file_names_the_batch_after_the_file_and_dates_it_by_its_rows(zone, meters, tmp_path):
    path = tmp_path / "readings jan #1.parquet"
    path.write_bytes(batch_of(readings([5, 7]), source="meters", day=dt.date(2026, 1, 5), batch_id="x", recorded_at=AT, fmt="parquet").data)
    records = zone.land_file(path, meters["meters"], recorded_at=AT)
    assert [(r.day, r.batch_id) for r in records] == [(dt.date(2026, 1, 5), "readings_jan__1"), (dt.date(2026, 1, 7), "readings_jan__1")]
    assert {r.recorded_at for r in records} == {AT}
    assert zone.land_file(path, meters["meters"], batch_id="manual", recorded_at=AT)[0].batch_id == "manual"
    wrong = tmp_path / "readings.csv"
    wrong.write_bytes(b"a,b\n")
    with pytest.raises(LandingError, match="not csv"):
        zone.land_file(wrong, meters["meters"])
