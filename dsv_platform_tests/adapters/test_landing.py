import datetime as dt
import os

import pytest

from dsv_platform.adapters.landing import LandingStatus, LandingZone, read_drop_file
from dsv_platform.bootstrap import build_landing
from dsv_platform.domain import FraudDomain, batch_file_name
from dsv_platform.domain import events
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=200)
DAY = DOMAIN.start + dt.timedelta(days=1)


@pytest.fixture
def zone(tmp_path):
    return build_landing(settings_at(tmp_path))


def test_identical_bytes_land_once(zone):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    first = zone.land(batch)
    assert first.status is LandingStatus.LANDED and first.rows == 200
    assert zone.read(first) == batch.data
    again = zone.land(batch)
    assert again.status is LandingStatus.UNCHANGED and again.digest == first.digest
    assert len(zone.records("transactions", DAY)) == 1


def test_different_bytes_for_a_batch_id_are_a_new_object_never_an_overwrite(zone):
    first = zone.land(events.daily_batch(DOMAIN, "transactions", DAY))
    revised = zone.land(events.renamed_column_batch(DOMAIN, DAY))
    assert revised.status is LandingStatus.REVISED and revised.digest != first.digest
    assert zone.store.exists(first.digest) and zone.store.exists(revised.digest)
    assert [r.digest for r in zone.loadable("transactions", DAY)] == [first.digest, revised.digest]


def test_malformed_batch_is_quarantined_with_the_reason(zone):
    record = zone.land(events.garbled_batch(DAY))
    assert record.status is LandingStatus.QUARANTINED and "CSV" in record.reason
    assert zone.store.exists(record.digest)  # raw is kept
    assert zone.loadable("transactions", DAY) == []
    assert zone.land(events.garbled_batch(DAY)).status is LandingStatus.QUARANTINED


def test_unknown_source_is_refused(zone):
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    with pytest.raises(KeyError):
        zone.land(events.RawBatch("payments", DAY, "daily", batch.recorded_at, batch.data))


def test_drop_file_becomes_a_batch(tmp_path):
    batch = events.daily_batch(DOMAIN, "chargebacks", DAY)
    path = tmp_path / batch_file_name("chargebacks", DAY, "manual-1")
    path.write_bytes(batch.data)
    os.utime(path, (1_800_000_000, 1_800_000_000))
    read = read_drop_file(path)
    assert (read.source, read.day, read.batch_id, read.data) == ("chargebacks", DAY, "manual-1", batch.data)
    assert read.recorded_at == dt.datetime.fromtimestamp(1_800_000_000, dt.UTC)
    assert read_drop_file(tmp_path / "README.csv") is None
