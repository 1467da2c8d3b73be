"""Time zone rules from the pinned `tzdata` package, never the host's zoneinfo.

`zone` builds a ZoneInfo from tzdata's TZif bytes; `tz_database` describes the
rules in use (what an artifact or dataset manifest records); `check_tz_database`
lists how recorded rules differ from the ones loaded now (empty: same rules).
"""

from __future__ import annotations

import functools
import hashlib
import io
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any
from zoneinfo import ZoneInfo

import tzdata  # type: ignore[import-untyped]

from dsv_platform.core.errors import ConfigurationError

TZ_SOURCE = "tzdata"


def _zone_resource(name: str) -> bytes:
    if not name or name.startswith(("/", ".")) or ".." in name.split("/"):
        raise ConfigurationError(f"time zone {name!r} is not an IANA zone name (e.g. Europe/Berlin)")
    parts = name.split("/")
    package = ".".join(["tzdata", "zoneinfo", *parts[:-1]])
    try:
        return resources.files(package).joinpath(parts[-1]).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise ConfigurationError(f"time zone {name!r} is not in the tzdata package {tzdata.IANA_VERSION}; use an IANA zone name (e.g. Europe/Berlin)") from exc


@functools.cache
def zone_bytes(name: str) -> bytes:
    """The TZif bytes of zone `name` in the installed tzdata package."""
    return _zone_resource(name)


@functools.cache
def zone(name: str) -> ZoneInfo:
    """The ZoneInfo of `name` built from tzdata's TZif bytes (cached; never the host's files)."""
    return ZoneInfo.from_file(io.BytesIO(zone_bytes(name)), key=name)


def tz_database(zones: Sequence[str]) -> dict[str, Any]:
    """{"source": "tzdata", "version": IANA version, "zones": {name: sha256 of its TZif bytes}}."""
    return {
        "source": TZ_SOURCE,
        "version": tzdata.IANA_VERSION,
        "zones": {name: hashlib.sha256(zone_bytes(name)).hexdigest() for name in sorted(set(zones))},
    }


def check_tz_database(recorded: Mapping[str, Any]) -> list[str]:
    """The differences between a recorded tz_database and the rules loaded now (empty = same rules)."""
    differences: list[str] = []
    if recorded.get("source") != TZ_SOURCE:
        differences.append(f"tz source: recorded {recorded.get('source')!r}, now {TZ_SOURCE!r}")
    if recorded.get("version") != tzdata.IANA_VERSION:
        differences.append(f"tzdata version: recorded {recorded.get('version')!r}, now {tzdata.IANA_VERSION!r}")
    zones = recorded.get("zones") or {}
    for name in sorted(zones):
        try:
            now = hashlib.sha256(zone_bytes(name)).hexdigest()
        except ConfigurationError:
            differences.append(f"zone {name}: recorded sha256 {zones[name]}, now absent from tzdata {tzdata.IANA_VERSION}")
            continue
        if now != zones[name]:
            differences.append(f"zone {name}: recorded sha256 {zones[name]}, now {now}")
    return differences
