"""A configuration folder unlike fraud: meters (string key, timestamp valid time), calibration, no labels."""

from __future__ import annotations

import textwrap
from pathlib import Path

METERS = """\
name: meters
description: Meter readings.
owner: grid
key: [reading_id]
partition_by: read_day
landing: {format: parquet}
valid_time: read_at
entity: meter_id
aliases: {kwh_total: kwh}
columns:
  - {name: reading_id, type: string}
  - {name: meter_id, type: string}
  - {name: read_at, type: timestamp, resolution: us}
  - {name: read_day, type: date}
  - {name: kwh, type: decimal, precision: 12, scale: 3}
  - {name: site, type: string, nullable: true}
"""

CALIBRATION = """\
name: calibration
owner: grid
key: [meter_id, calibrated_at]
partition_by: calibrated_day
landing: {format: jsonl}
valid_time: calibrated_at
entity: meter_id
columns:
  - {name: meter_id, type: string}
  - {name: calibrated_at, type: timestamp, resolution: us}
  - {name: calibrated_day, type: date}
  - {name: factor, type: float64, scale: 4}
"""

DATASET = """\
name: meter_readings
version: v1
description: Readings with the calibration in force when read.
owner: grid
base: meters
as_of_joins:
  - {source: calibration, on: [meter_id], time: read_at, lag: 0d}
observation_window: {column: read_at, start: "2026-01-01", end: "2026-01-31"}
split_policy:
  policy: group-split/1
  group_column: meter_id
  salt: meters
  bounds: "train=80,test=100"
watermark: {rule: latest_recorded}
gates: {rows_at_least: 1}
seed: 1
contract:
  name: meter_readings
  key: [reading_id]
  partition_by: read_day
  columns:
    - {name: reading_id, type: string}
    - {name: meter_id, type: string}
    - {name: read_at, type: timestamp, resolution: us}
    - {name: read_day, type: date}
    - {name: kwh, type: decimal, precision: 12, scale: 3}
    - {name: factor, type: float64, scale: 4, nullable: true}
"""


def write_config(root: Path, files: dict[str, str] | None = None) -> Path:
    """A config folder under ``root``; ``files`` ({relative path: text}) overrides or adds files."""
    base = {"sources/meters.yaml": METERS, "sources/calibration.yaml": CALIBRATION, "datasets/meter_readings_v1.yaml": DATASET}
    for rel, text in {**base, **(files or {})}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root
