"""Issue 22: a landed batch that touches several days is read once and appended in one snapshot for all of them.

Loading day by day made one snapshot per day and read the whole batch once per day. Per day the semantics
stay: a day that holds the batch already is skipped (so a later run over more days appends only the new
days), each day reports its own rows, and lineage links the batch to the snapshot it made.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.services.ingest.canonical_load import load_partitions
from dsv_platform.settings import load_settings

SOURCE = """name: labs
key: [result_id]
partition_by: day
landing: {format: csv}
valid_time: day
columns:
  - {name: result_id, type: int64}
  - {name: day, type: date}
  - {name: value, type: float64, scale: 2}
"""
DAYS = [dt.date(2026, 6, 1), dt.date(2026, 6, 2), dt.date(2026, 6, 3)]


def test_one_snapshot_for_the_days_a_batch_touches(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "sources").mkdir(parents=True)
    (config / "sources" / "labs.yaml").write_text(SOURCE)
    (config / "platform.yaml").write_text('partitions: {start: "2026-06-01"}\n')
    batch = tmp_path / "labs.csv"
    batch.write_text("result_id,day,value\n" + "".join(f"{i},{DAYS[i % 3]},{i}.5\n" for i in range(30)))
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    with build_platform(settings) as platform:
        spec = load_config(config).sources["labs"]
        platform.landing.land_file(batch, spec, recorded_at=dt.datetime(2026, 6, 4, tzinfo=dt.UTC))
        first = load_partitions(platform, spec, DAYS[:2])  # a run over two of the batch's three days
        assert [(x.day, x.batches[0].accepted, x.batches[0].outcome.appended) for x in first] == [(DAYS[0], 10, 10), (DAYS[1], 10, 10)]
        assert len(platform.tables.snapshots(spec)) == 1 and first[0].snapshot_id == first[1].snapshot_id
        again = load_partitions(platform, spec, DAYS)  # the first two days hold the batch: only the third is appended
        assert [(b.outcome.already_applied, b.outcome.appended) for x in again for b in x.batches] == [(True, 0), (True, 0), (False, 10)]
        assert [x.batches[0].accepted for x in again] == [10, 10, 10]
        assert len(platform.tables.snapshots(spec)) == 2 and again[2].snapshot_id != first[0].snapshot_id
        assert platform.tables.read(spec).num_rows == 30
        assert load_partitions(platform, spec, DAYS)[2].batches[0].outcome.already_applied
        assert len(platform.tables.snapshots(spec)) == 2
