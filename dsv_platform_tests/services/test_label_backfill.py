"""Labels of a batch loaded late with an older recorded time (a backfill in any order): the label build must not skip it.

Before: one label batch per watermark (``label@<watermark>``); a batch recorded before the watermark left it unchanged,
so the rebuild found its batch name taken and appended nothing: the late transactions never got a label.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.compute as pc

from dsv_platform.core.config.source import DerivedTableSpec, TableSpecLike
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.services.ingest.label_build import label_table_spec, watermark
from dsv_platform_tests.scenarios.support import World


def test_a_batch_recorded_before_the_watermark_is_labelled_and_the_newer_labels_win(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    label = world.platform.config.labels["fraud"][6]
    spec = label_table_spec(label)
    before = world.tables.read(spec)
    mark = watermark(world.tables, *(world.platform.config.sources[n] for n in label.inputs))
    day = world.domain.days(4)[1]
    late = late_transactions(world.domain, day, arrived=day + dt.timedelta(days=1), count=6)  # recorded before the watermark
    assert late.recorded_at < mark  # type: ignore[operator]
    world.ingest([late])  # loads it and rebuilds every label version
    after = world.tables.read(spec)
    ids = set(after.column("transaction_id").to_pylist())
    late_ids = set(before.column("transaction_id").to_pylist()) ^ ids
    assert len(late_ids) == 6, "the late transactions are labelled"
    assert after.num_rows == before.num_rows + 6
    # the label table's recorded times only move forward: the new computation is the latest per key
    hist = world.tables.read(spec, history=True)
    assert pc.max(hist.column("_recorded_at")).as_py() > mark  # type: ignore[operator]
    world.ingest([])  # nothing new: the same input state, no new label batch
    assert world.tables.read(spec, history=True).num_rows == hist.num_rows


def _scanned(world: World, *specs: TableSpecLike) -> dt.datetime | None:
    marks = [pc.max(h.column("_recorded_at")).as_py() for s in specs if (h := world.tables.read(s, history=True)).num_rows]
    return max(marks) if marks else None


def test_the_watermark_from_manifest_bounds_is_the_latest_recorded_time_a_scan_of_every_version_finds(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=30, days=3)
    label = world.platform.config.labels["fraud"][6]
    inputs = [world.platform.config.sources[n] for n in label.inputs]
    empty = DerivedTableSpec("labels_never_built", label.contract)
    assert watermark(world.tables, empty) is None  # a table without a snapshot has no watermark
    marks = {spec.name: watermark(world.tables, spec) for spec in (*inputs, label_table_spec(label))}
    assert marks == {spec.name: _scanned(world, spec) for spec in (*inputs, label_table_spec(label))}
    assert marks["transactions"] is not None and marks[label_table_spec(label).name] is not None
    day = world.domain.days(3)[0]
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(hours=30), count=4)])  # a correction recorded later
    assert watermark(world.tables, *inputs) == _scanned(world, *inputs)
