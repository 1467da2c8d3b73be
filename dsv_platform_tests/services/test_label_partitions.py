"""Issue 22 item 3: a label build appends partition by partition (the table read one partition at a time), in one snapshot.

Against the whole-history append it replaced, on a real home: the same rows, the same content hash and the same
counts; a partition that already holds the batch is skipped; a changed partition appends only its changed rows.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_values import BATCHES_PROPERTY
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.services.ingest.label_build import append_by_partition, label_table_spec, watermark
from dsv_platform_tests.scenarios.support import World

WHEN = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def _labels(world: World) -> tuple[object, pa.Table]:
    label = world.platform.config.labels["fraud"][6]
    inputs = [world.platform.config.sources[n] for n in label.inputs]
    mark = watermark(world.tables, *inputs)
    return label_table_spec(label), label.compute({s.name: world.tables.read(s, as_of=mark) for s in inputs})


def _flip(rows: pa.Table, day: object) -> pa.Table:
    """The labels with ``is_fraud`` negated on the rows of one partition."""
    on_day = pc.equal(rows.column("event_date"), pa.scalar(day, rows.schema.field("event_date").type))
    flipped = pc.if_else(on_day, pc.invert(rows.column("is_fraud")), rows.column("is_fraud"))
    return rows.set_column(rows.schema.get_field_index("is_fraud"), "is_fraud", flipped)


def test_a_label_build_appends_per_partition_like_the_whole_history_append(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=30, days=4)
    spec, rows = _labels(world)
    days = sorted(set(rows.column("event_date").to_pylist()))
    assert len(days) > 1
    whole, parts = (CanonicalTables(world.tables.catalog, namespace=n) for n in ("whole", "parts"))
    a = whole.append(spec, rows, recorded_at=WHEN, batch="labels@1")
    b = append_by_partition(parts, spec, rows, recorded_at=WHEN, batch="labels@1")
    assert (a.appended, a.unchanged, a.already_applied) == (b.appended, b.unchanged, b.already_applied) == (rows.num_rows, 0, False)
    assert hash_table(parts.read(spec), spec.contract).content_hash == hash_table(whole.read(spec), spec.contract).content_hash
    [snap] = parts.table(spec).snapshots()  # one snapshot for every partition
    assert json.loads(snap.summary[BATCHES_PROPERTY]) == ["labels@1"]
    assert int(snap.summary["changed-partition-count"]) == len(days)
    again = append_by_partition(parts, spec, rows, recorded_at=WHEN, batch="labels@1")
    assert again.already_applied and again.appended == 0 and again.snapshot_id == b.snapshot_id
    changed = _flip(rows, days[1])
    a2 = whole.append(spec, changed, recorded_at=WHEN + dt.timedelta(days=1), batch="labels@2")
    b2 = append_by_partition(parts, spec, changed, recorded_at=WHEN + dt.timedelta(days=1), batch="labels@2")
    assert (b2.appended, b2.unchanged) == (a2.appended, a2.unchanged) and 0 < b2.appended < rows.num_rows
    assert int(parts.table(spec).current_snapshot().summary["changed-partition-count"]) == 1
    assert hash_table(parts.read(spec), spec.contract).content_hash == hash_table(whole.read(spec), spec.contract).content_hash
