"""Time zone rules come from the pinned tzdata package and are recorded by hash."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from importlib import resources

import pytest
import tzdata

from dsv_platform.core.config.timezones import check_tz_database, tz_database, zone
from dsv_platform.core.errors import ConfigurationError


def _tzdata_bytes(*parts: str) -> bytes:
    return resources.files(".".join(["tzdata", "zoneinfo", *parts[:-1]])).joinpath(parts[-1]).read_bytes()


def test_zone_applies_berlin_dst_change_of_2026() -> None:
    berlin = zone("Europe/Berlin")
    before = datetime(2026, 3, 29, 0, 30, tzinfo=UTC).astimezone(berlin)
    after = datetime(2026, 3, 29, 1, 30, tzinfo=UTC).astimezone(berlin)
    assert (before.hour, before.utcoffset().total_seconds()) == (1, 3600)  # type: ignore[union-attr]
    assert (after.hour, after.utcoffset().total_seconds()) == (3, 7200)  # type: ignore[union-attr]
    assert zone("Europe/Berlin") is berlin


def test_tz_database_records_version_and_zone_hashes() -> None:
    recorded = tz_database(["UTC", "Europe/Berlin", "UTC"])
    assert recorded["source"] == "tzdata"
    assert recorded["version"] == tzdata.IANA_VERSION
    assert recorded["zones"] == {
        "Europe/Berlin": hashlib.sha256(_tzdata_bytes("Europe", "Berlin")).hexdigest(),
        "UTC": hashlib.sha256(_tzdata_bytes("UTC")).hexdigest(),
    }
    assert list(recorded["zones"]) == ["Europe/Berlin", "UTC"]


def test_check_tz_database_is_empty_for_the_rules_loaded_now() -> None:
    assert check_tz_database(tz_database(["Europe/Berlin"])) == []


def test_check_tz_database_names_a_changed_zone_and_version() -> None:
    recorded = tz_database(["Europe/Berlin"])
    recorded["version"] = "1999a"
    recorded["zones"]["Europe/Berlin"] = "0" * 64
    differences = check_tz_database(recorded)
    assert len(differences) == 2
    assert "1999a" in differences[0]
    assert differences[1].startswith("zone Europe/Berlin: recorded sha256 " + "0" * 64)


def test_check_tz_database_names_a_zone_missing_now() -> None:
    differences = check_tz_database({"source": "tzdata", "version": tzdata.IANA_VERSION, "zones": {"Mars/Olympus": "ab"}})
    assert differences == [f"zone Mars/Olympus: recorded sha256 ab, now absent from tzdata {tzdata.IANA_VERSION}"]


@pytest.mark.parametrize("name", ["Mars/Olympus", "../etc/passwd", "", "/etc/localtime", "Europe"])
def test_zone_refuses_an_unknown_name(name: str) -> None:
    with pytest.raises(ConfigurationError, match="time zone"):
        zone(name)
