"""The lag of a published realization from valid time, split into upstream (arrival) and our build (compute).

From the manifest and the registry, never a data scan. Valid time: the end of the newest observation day the
realization holds (its newest partition key when partitioned by the window's column, else the window's end), not
after the watermark. ``event_s`` = publication - valid time; ``arrival_s`` = watermark (newest ``_recorded_at``
read) - valid time ("upstream truth is late"); ``compute_s`` = publication - watermark ("our build is slow", the
status's publication lag). ``event_s`` = ``arrival_s`` + ``compute_s``. Details: docs/configuration.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

from dsv_platform.core.publication.manifest import Manifest

PARTS = ("event_s", "arrival_s", "compute_s")


def _day_end(day: dt.date, zone: str | None) -> dt.datetime:
    """The first instant after ``day`` (local midnight of the next day in ``zone``, else UTC midnight)."""
    tz = ZoneInfo(zone) if zone else dt.UTC
    return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=tz).astimezone(dt.UTC)


def _newest_day(manifest: Manifest, window: Mapping[str, Any]) -> dt.date | None:
    """The newest observation day among the partition keys (``<column>=<ISO date>``), within the window; else its end."""
    end = dt.date.fromisoformat(str(window["end"]))
    prefix = f"{window['column']}="
    days = []
    for p in manifest.partitions:
        if p.key.startswith(prefix) and p.rows > 0:
            try:
                days.append(dt.date.fromisoformat(p.key[len(prefix) :][:10]))
            except ValueError:
                return end  # not a day partition: the window's end is the bound
    return min(max(days), end) if days else end


def max_valid_time(manifest: Manifest) -> dt.datetime | None:
    """The newest valid (event) time the realization can hold, or None when its manifest records no window."""
    window = manifest.observation_window
    if window is None or "end" not in window or "column" not in window:
        return None
    day = _newest_day(manifest, window)
    if day is None:
        return None
    valid = _day_end(day, str(window["timezone"]) if window.get("timezone") else None)
    if manifest.watermark:
        valid = min(valid, dt.datetime.fromisoformat(manifest.watermark).astimezone(dt.UTC))
    return valid


def lag_split(manifest: Manifest, published_at: dt.datetime) -> dict[str, float | None]:
    """``{event_s, arrival_s, compute_s}`` of a realization published at ``published_at`` (None: not recorded)."""
    mark = dt.datetime.fromisoformat(manifest.watermark).astimezone(dt.UTC) if manifest.watermark else None
    valid = max_valid_time(manifest)
    published = published_at.astimezone(dt.UTC)
    return {
        "event_s": None if valid is None else (published - valid).total_seconds(),
        "arrival_s": None if valid is None or mark is None else (mark - valid).total_seconds(),
        "compute_s": None if mark is None else (published - mark).total_seconds(),
    }


def parts_over(lag: Mapping[str, float | None] | None, bound_seconds: float) -> list[str]:
    """Which of the two parts of the lag, ``arrival`` (upstream) and ``compute`` (the build), alone exceed ``bound_seconds``."""
    if not lag:
        return []
    return [name for name in ("arrival", "compute") if (v := lag.get(f"{name}_s")) is not None and v > bound_seconds]
