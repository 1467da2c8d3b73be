"""One scenario per failure mode: a realization built before the event still resolves and re-hashes to the
same content hash after it, while a rebuild reflects the event (or, where nothing should change, does not).

Each test takes its own "before" right before its event, so the tests share one small world
(module-scoped, real SQLite catalog and registry) and still run in any order.
"""

from __future__ import annotations

import datetime as dt

import pyarrow.compute as pc
import pytest

from dsv_platform import open_dataset
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform_tests.scenarios.support import World

D = dt.date


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World.create(tmp_path_factory.mktemp("scenario") / "dsv")


def _rows(world: World, build, day: dt.date | None = None):
    table = open_dataset(build.ref, settings=world.settings).to_arrow()
    return table if day is None else table.filter(pc.equal(table.column("event_date"), day))


def test_late_events_rebuild_includes_them_and_old_realization_is_unchanged(world):
    before = world.build()
    batch = events.late_transactions(world.domain, D(2026, 6, 2), arrived=D(2026, 6, 9), count=7)
    late_ids = {i + events.LATE_ID_OFFSET for i in world.domain.transactions(D(2026, 6, 2)).column("transaction_id").to_pylist()[:7]}
    world.ingest([batch])
    after = world.build()
    assert world.reverify(before) == before.content_hash
    assert after.content_hash != before.content_hash
    ids = lambda b: set(_rows(world, b, D(2026, 6, 2)).column("transaction_id").to_pylist())  # noqa: E731
    assert not late_ids & ids(before) and ids(after) - ids(before) == late_ids
    changed = {p.key for p in after.manifest.partitions} ^ {p.key for p in before.manifest.partitions} | {
        a.key for a in after.manifest.partitions for b in before.manifest.partitions if a.key == b.key and a.hash != b.hash
    }
    assert changed == {"event_date=2026-06-02"}
    assert after.manifest.watermark > before.manifest.watermark


def test_feature_backfill_rebuild_corrects_features_and_old_realization_is_unchanged(world):
    world.ingest([events.buggy_feature_batch(world.domain, D(2026, 6, 6))])
    before = world.build()
    world.ingest(events.feature_backfill(world.domain, D(2026, 6, 6), D(2026, 6, 6), recorded_on=D(2026, 6, 12)))
    after = world.build()
    assert world.reverify(before) == before.content_hash
    moved = {a.key for a in after.manifest.partitions for b in before.manifest.partitions if a.key == b.key and a.hash != b.hash}
    assert moved == {"event_date=2026-06-07"}  # features of the previous day
    buggy = pc.sum(_rows(world, before, D(2026, 6, 7)).column("amount_sum_7d")).as_py()
    fixed = pc.sum(_rows(world, after, D(2026, 6, 7)).column("amount_sum_7d")).as_py()
    assert buggy == fixed * 100
    assert after.manifest.feature_versions == {"account_features": "v1", "transactions": "v1"}  # the sources' declared contract versions
    assert before.manifest.feature_versions == after.manifest.feature_versions  # a backfill corrects rows, not the feature version


def test_label_definition_change_is_a_new_realization_and_v5_is_unchanged(world):
    v5 = world.build("v5")
    v6 = world.build("v6")
    assert world.reverify(v5) == v5.content_hash
    assert (v5.manifest.labels.version, v6.manifest.labels.version) == ("v5", "v6")
    assert v5.content_hash != v6.content_hash and v5.ref.split("@")[0] != v6.ref.split("@")[0]
    assert set(_rows(world, v5).column("label_version").to_pylist()) == {5}
    assert {p.table for p in v6.manifest.sources} >= {"labels_fraud_v6"}


def test_renamed_column_is_read_through_the_compatibility_view(world):
    before = world.build()
    day = D(2026, 6, 10)
    batch = events.renamed_column_batch(world.domain, day)
    assert b"merchant_risk_score" in batch.data.splitlines()[0]
    world.ingest([batch])
    after = world.build()
    assert world.reverify(before) == before.content_hash
    new = _rows(world, after, day)
    assert new.num_rows == world.domain.transactions(day).num_rows
    assert new.column("merchant_risk").to_pylist() == world.domain.transactions(day).sort_by("transaction_id").column("merchant_risk").to_pylist()
    assert _rows(world, before, day).num_rows == 0


def test_malformed_batch_quarantines_bad_rows_only(world):
    before = world.build()
    day = D(2026, 6, 11)
    world.ingest([events.malformed_batch(world.domain, day), daily_batch(world.domain, "account_features", day)])
    after = world.build()
    assert world.reverify(before) == before.content_hash
    sent = world.domain.transactions(day).num_rows
    kept = _rows(world, after, day).num_rows
    assert 0 < sent - kept <= 5  # a few broken rows (and the conflicting duplicate) are quarantined, the rest load
    assert world.reverify(after) == after.content_hash


def test_rebuild_over_unchanged_sources_reuses_the_realization(world):
    first = world.build()
    again = world.build()
    assert again.reused and again.ref == first.ref
