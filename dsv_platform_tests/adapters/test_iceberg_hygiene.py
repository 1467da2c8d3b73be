"""Issue 26 item 13: table hygiene (metadata cleanup, target file size, key sort order), pins with a max ref age,
pyiceberg's ``older_than`` expiry, and orphan data files found and collected on an S3 warehouse.

Deleting old metadata files is safe because pins and time travel name snapshots, which the current metadata
lists whole: a realization still re-hashes to its content hash after its build's metadata files are gone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsv_platform.adapters.iceberg import iceberg
from dsv_platform.adapters.iceberg import iceberg_maintenance as ice
from dsv_platform.adapters.iceberg.iceberg_hygiene import PIN_MAX_REF_AGE_MS, TABLE_PROPERTIES
from dsv_platform.adapters.iceberg.iceberg_values import BATCH_METRICS, table_schema
from dsv_platform.bootstrap import build_tables
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.core.retention.policy import GcPolicy
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform.services.retention import gc
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.support import World

DOMAIN = FraudDomain(rows_per_day=50)
DAY = DOMAIN.start + dt.timedelta(days=1)


def _append(tables, batch, name=None):
    return tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=name or batch.batch_id)


def _files(tbl):
    return {e.data_file.file_path for m in tbl.current_snapshot().manifests(tbl.io) for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)}


def test_a_new_table_has_the_hygiene_properties_a_key_sort_order_and_sorted_files(tmp_path):
    tables = build_tables(settings_at(tmp_path))
    _append(tables, events.daily_batch(DOMAIN, "transactions", DAY))
    tbl = tables.table(TRANSACTIONS)
    assert {k: tbl.properties.get(k) for k in TABLE_PROPERTIES} == TABLE_PROPERTIES
    assert [tbl.schema().find_column_name(f.source_id) for f in tbl.sort_order().fields] == list(TRANSACTIONS.contract.key)
    for path in _files(tbl):
        keys = pq.read_table(path.removeprefix("file://"), columns=list(TRANSACTIONS.contract.key)).to_pylist()
        assert keys == sorted(keys, key=lambda r: tuple(r.values()))
    pin = tables.pin(TRANSACTIONS, "ds-v1-abc")
    assert tables.table(TRANSACTIONS).refs()["ds-v1-abc"].max_ref_age_ms == PIN_MAX_REF_AGE_MS and pin.snapshot_id


def test_a_table_made_before_gets_them_on_its_next_write_without_a_rewrite(tmp_path, monkeypatch):
    tables = build_tables(settings_at(tmp_path))
    monkeypatch.setattr(iceberg, "upgraded", lambda txn, tbl, contract: txn)  # the first write as before this change
    tables.catalog.create_namespace(tables.namespace)
    ident, schema = tables.identifier(TRANSACTIONS), table_schema(TRANSACTIONS.contract)
    with tables.catalog.create_table_transaction(ident, schema=schema, properties=BATCH_METRICS) as txn, txn.update_spec() as update:
        update.add_identity("event_date")
    _append(tables, events.daily_batch(DOMAIN, "transactions", DAY))
    old = tables.table(TRANSACTIONS)
    assert old.sort_order().is_unsorted and "write.metadata.delete-after-commit.enabled" not in old.properties
    before = _files(old)
    monkeypatch.undo()
    _append(tables, events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=3), count=5))
    now = tables.table(TRANSACTIONS)
    assert {k: now.properties.get(k) for k in TABLE_PROPERTIES} == TABLE_PROPERTIES and not now.sort_order().is_unsorted
    assert before < _files(now)  # the old data files are still the table's: nothing rewritten
    assert tables.read(TRANSACTIONS, partition=DAY).num_rows == 55


def test_old_metadata_files_go_and_realizations_and_time_travel_still_read(tmp_path):
    world = World.create(tmp_path / "home", rows_per_day=40, days=2)
    built = world.build("v6")
    pinned = world.tables.tags(TRANSACTIONS)
    for name in world.tables.table_names():  # keep two, so the build's metadata files go within a few commits
        world.tables.load(name).transaction().set_properties({"write.metadata.previous-versions-max": "2"}).commit_transaction()
    first_metadata = world.tables.table(TRANSACTIONS).metadata.metadata_log[0].metadata_file
    for i in range(4):
        world.ingest([events.late_transactions(world.domain, world.domain.start, arrived=world.domain.start + dt.timedelta(days=5 + i), count=3)])
    tbl = world.tables.table(TRANSACTIONS)
    assert len(tbl.metadata.metadata_log) <= 2 and not Path(first_metadata.removeprefix("file://")).exists()
    assert len(list(Path(tbl.metadata.location.removeprefix("file://"), "metadata").glob("*.metadata.json"))) == 3  # the current and two
    assert world.tables.tags(TRANSACTIONS) == pinned
    [sid] = pinned.values()
    assert world.tables.read(TRANSACTIONS, snapshot_id=sid).num_rows == 80  # time travel to the pin
    assert world.reverify(built) == built.content_hash


def test_expiry_older_than_keeps_every_pinned_snapshot(tmp_path):
    tables = build_tables(settings_at(tmp_path))
    _append(tables, events.daily_batch(DOMAIN, "transactions", DAY))
    pin = tables.pin(TRANSACTIONS, "ds-v1-abc")
    for i in range(3):
        _append(tables, events.late_transactions(DOMAIN, DAY, arrived=DAY + dt.timedelta(days=3 + i), count=2))
    current = tables.current_snapshot_id(TRANSACTIONS)
    expired = ice.expire_unprotected(tables, older_than=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))
    assert expired == 2 and {s.snapshot_id for s in tables.snapshots(TRANSACTIONS)} == {pin.snapshot_id, current}
    assert tables.read(TRANSACTIONS, snapshot_id=pin.snapshot_id).num_rows == 50
    assert ice.expire_unprotected(tables, older_than=dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) == 0


@pytest.mark.s3
@pytest.mark.postgres
def test_an_orphan_data_file_on_an_s3_warehouse_is_found_and_collected(tmp_path, s3_env, postgres_url):
    bucket = s3_env.create_bucket()
    settings = dataclasses.replace(
        settings_at(tmp_path), iceberg_catalog_url=postgres_url, iceberg_warehouse=f"s3://{bucket}/warehouse",
        s3_endpoint_url=s3_env.endpoint_url, s3_region=s3_env.region,
    )  # fmt: skip
    world = World.create(settings=settings, rows_per_day=10, days=2)
    tbl = world.tables.table(TRANSACTIONS)
    orphan = tbl.metadata.location.rstrip("/") + "/data/event_date=2026-06-01/left-by-a-crash.parquet"
    with tbl.io.new_output(orphan).create() as out:
        out.write(b"PAR1 written, never committed")
    live = _files(tbl)
    _, _, files = ice.inventory(world.tables)
    listed = {f.path: f for f in files if f.table == TRANSACTIONS.name}
    assert orphan in listed and listed[orphan].modified_at is not None and live <= set(listed)
    store = world.platform.store
    plan = gc.plan(world.registry, store, tables=world.tables, landing=world.zone, policy=GcPolicy(safety_window=dt.timedelta(0)))
    report = gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables, dry_run=False, actor="test")
    assert orphan in report.data_files_deleted and not tbl.io.new_input(orphan).exists()
    assert pc.sum(world.tables.read(TRANSACTIONS).column("amount")).as_py() is not None and _files(world.tables.table(TRANSACTIONS)) == live
