"""The scale configuration: a source of the seed's shape (string keys, daily partitions) and an as-of joined feature table.

One generator for the three places that build on it: ``benchmarks.bench_scale`` (1M rows end to end), the
bounded-memory ingest test (``dsv_platform_tests/cli/test_ingest_bounded_memory.py``) and the memory-capped
build test (``dsv_platform_tests/services/test_build_memory.py``). ``extra_columns`` appends columns (YAML list
items) to the events, e.g. a wide text column that makes the rows heavy in memory.
"""

from __future__ import annotations

from pathlib import Path

EVENT_COLUMNS = """  - {name: event_id, type: string}
  - {name: account_id, type: string}
  - {name: event_time, type: timestamp, resolution: us}
  - {name: event_day, type: date}
  - {name: amount, type: float64, scale: 4}
"""
"""The events' columns: the source's, and the first of the dataset's output."""
FEATURES_SOURCE = """name: features
description: generated account features, valid from a day
owner: bench
key: [account_id, valid_from]
partition_by: valid_from
landing: {format: parquet}
valid_time: valid_from
entity: account_id
columns:
  - {name: account_id, type: string}
  - {name: valid_from, type: date}
  - {name: risk, type: float64, scale: 4}
"""


def events_source(extra_columns: str = "") -> str:
    """The events source: string keys, one partition a day, the account as entity."""
    return """name: events
description: generated events (string keys)
owner: bench
key: [event_id]
partition_by: event_day
landing: {format: parquet}
valid_time: event_time
entity: account_id
columns:
""" + EVENT_COLUMNS + extra_columns


def contract(extra_columns: str = "") -> str:
    """The dataset's contract: the events' columns and the account's risk as of the event."""
    return """name: scale_set
description: events with the account's risk as of the event
owner: bench
key: [event_id]
partition_by: event_day
columns:
""" + EVENT_COLUMNS + extra_columns + "  - {name: risk, type: float64, scale: 4, nullable: true}\n"


def definition(version: str = "v1", extra_columns: str = "") -> str:
    """``scale_set:<version>``: the events as-of joined with the features over June 2026, group-split by account."""
    return f"""name: scale_set
version: {version}
description: events with the account's risk as of the event
owner: bench
base: events
as_of_joins:
  - {{source: features, on: [account_id], time: event_time}}
observation_window: {{column: event_day, start: "2026-06-01", end: "2026-06-30"}}
split_policy: {{policy: group-split/1, group_column: account_id, salt: bench, bounds: "train=80,validation=90,test=100"}}
watermark: {{rule: latest_recorded}}
gates: {{rows_at_least: 1}}
seed: 1
contract:
""" + "".join(f"  {line}\n" for line in contract(extra_columns).splitlines())


def write_config(folder: Path, *, extra_columns: str = "", versions: tuple[str, ...] = ("v1",)) -> Path:
    """The configuration folder: platform.yaml, both sources, and ``scale_set`` at each of ``versions``."""
    (folder / "sources").mkdir(parents=True)
    (folder / "datasets").mkdir()
    (folder / "platform.yaml").write_text('partitions: {start: "2026-05-01"}\n')
    (folder / "sources" / "events.yaml").write_text(events_source(extra_columns))
    (folder / "sources" / "features.yaml").write_text(FEATURES_SOURCE)
    for version in versions:
        (folder / "datasets" / f"scale_set_{version}.yaml").write_text(definition(version, extra_columns))
    return folder
