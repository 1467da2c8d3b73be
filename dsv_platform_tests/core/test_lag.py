"""The lag split from a manifest alone (core/publication/lag.py): which day ends the valid time, and its bounds."""

from __future__ import annotations

import datetime as dt

from dsv_platform.core.publication.lag import lag_split, max_valid_time, parts_over
from dsv_platform.core.publication.manifest import Manifest, PartitionEntry, content_hash_of

PUBLISHED = dt.datetime(2026, 6, 10, 12, tzinfo=dt.UTC)


def _manifest(keys: list[tuple[str, int]], window: dict[str, str] | None, watermark: str | None) -> Manifest:
    parts = tuple(PartitionEntry(key=k, hash=f"{i:064x}", rows=rows, object="f" * 64, bytes=1) for i, (k, rows) in enumerate(keys))
    content = content_hash_of((p.key, p.hash) for p in parts)
    return Manifest("d", "v1", "a" * 64, content, sum(r for _, r in keys), parts, observation_window=window, watermark=watermark)


WINDOW = {"column": "event_date", "start": "2026-06-01", "end": "2026-06-30"}


def test_the_newest_day_with_rows_ends_the_valid_time_not_the_windows_end() -> None:
    m = _manifest([("event_date=2026-06-01", 5), ("event_date=2026-06-03", 5), ("event_date=2026-06-04", 0)], WINDOW, "2026-06-05T02:00:00+00:00")
    assert max_valid_time(m) == dt.datetime(2026, 6, 4, tzinfo=dt.UTC)  # the empty 06-04 partition holds no truth
    assert lag_split(m, PUBLISHED) == {"event_s": (6 * 24 + 12) * 3600.0, "arrival_s": 26 * 3600.0, "compute_s": (5 * 24 + 10) * 3600.0}


def test_local_days_of_the_windows_timezone_and_the_watermark_bound() -> None:
    zoned = {**WINDOW, "timezone": "America/New_York"}
    m = _manifest([("event_date=2026-06-03", 5)], zoned, "2026-06-05T02:00:00+00:00")
    assert max_valid_time(m) == dt.datetime(2026, 6, 4, 4, tzinfo=dt.UTC)  # local midnight, EDT
    early = _manifest([("event_date=2026-06-03", 5)], WINDOW, "2026-06-03T18:00:00+00:00")  # recorded before the day ended
    assert max_valid_time(early) == dt.datetime(2026, 6, 3, 18, tzinfo=dt.UTC) and lag_split(early, PUBLISHED)["arrival_s"] == 0


def test_other_partitions_fall_back_to_the_windows_end_and_no_window_records_no_event_lag() -> None:
    m = _manifest([("region=EU", 5)], WINDOW, "2026-07-02T00:00:00+00:00")
    assert max_valid_time(m) == dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
    bare = _manifest([("all", 5)], None, "2026-06-05T02:00:00+00:00")
    assert lag_split(bare, PUBLISHED) == {"event_s": None, "arrival_s": None, "compute_s": (5 * 24 + 10) * 3600.0}


def test_parts_over_names_upstream_and_build_separately() -> None:
    assert parts_over({"event_s": 30.0, "arrival_s": 20.0, "compute_s": 10.0}, 15) == ["arrival"]
    assert parts_over({"event_s": 30.0, "arrival_s": 10.0, "compute_s": 20.0}, 15) == ["compute"]
    assert parts_over({"event_s": 30.0, "arrival_s": None, "compute_s": 20.0}, 25) == [] and parts_over(None, 1) == []
