"""The rest of issue 27 item 3: lag from valid time split into arrival and compute, and consumption health.

A real world (SQLite catalog and registry, local encrypted objects) on a copy of the fraud configuration whose v6
declares ``slo: {usable_freshness: 26h, publication_lag: 48h}``. The fraud sources arrive the morning after their
day (02:00 and 03:00 UTC), in June; the build runs now. Reads go through the real ``open_dataset``; the store's
objects are damaged on disk (one flipped, one deleted) and ``dsv status`` counts them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from sqlalchemy import text

from dsv_platform import open_dataset
from dsv_platform.core.errors import CorruptError
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import run_dsv
from dsv_platform_tests.scenarios.support import CONFIG_DIR, World
from dsv_platform_tests.services.reproduce_support import corrupted

V6 = "fraud_training_set:v6"


@pytest.fixture
def world(tmp_path: Path) -> World:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    path = config / "datasets" / "fraud_training_set_v6.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "slo: {usable_freshness: 26h, publication_lag: 48h}\n", encoding="utf-8")
    settings = dataclasses.replace(load_settings({}).with_home(tmp_path / "dsv"), config_dir=config)
    return World.create(settings=settings, rows_per_day=40, days=3)


def _env(world: World) -> dict[str, str]:
    return {"DSV_HOME": str(world.settings.home), "DSV_CONFIG_DIR": str(world.settings.config_dir)}


def _status(world: World) -> dict[str, Any]:
    out = run_dsv(_env(world), "status", "--json")
    assert out.returncode == 0, out.stderr
    return {s["ref"]: s for s in json.loads(out.stdout)}[V6]


def _valid_end(world: World, ref: str) -> dt.datetime:
    """The end of the newest event day among the rows (read back, for the test only: the platform never scans)."""
    with open_dataset(ref, settings=world.settings) as ds:
        newest = pc.max(ds.to_arrow().column("event_date")).as_py()
    return dt.datetime.combine(newest + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)


def test_lag_from_valid_time_tells_a_late_upstream_from_a_slow_build(world: World) -> None:
    first = world.build("v6")
    v6 = _status(world)
    lag, watermark = v6["lag"], dt.datetime.fromisoformat(first.manifest.watermark or "")
    end = _valid_end(world, first.ref)
    assert lag["arrival_s"] == (watermark - end).total_seconds() == 2 * 3600  # the last day's transactions came at 02:00 the next morning
    assert lag["compute_s"] == v6["publication_lag_seconds"] > 48 * 3600  # published in December: our side is late
    assert lag["event_s"] == pytest.approx(lag["arrival_s"] + lag["compute_s"])
    [slo] = [o for o in v6["slo"] if o["objective"] == "publication_lag"]
    assert (slo["met"], slo["over"], slo["lag"]) == (False, ["compute"], lag)

    # upstream truth late: the last day's transactions only arrive now (two days ago); the rebuild is prompt
    newest = (end - dt.timedelta(days=1)).date()
    arrived = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=2)
    world.ingest([late_transactions(world.domain, newest, arrived=arrived)])
    second = world.build("v6")
    assert second.manifest_hash != first.manifest_hash
    v6 = _status(world)
    lag = v6["lag"]
    late_mark = dt.datetime.combine(arrived + dt.timedelta(days=1), dt.time(2), tzinfo=dt.UTC)
    assert lag["arrival_s"] == (late_mark - end).total_seconds() > 150 * 86400
    assert 0 < lag["compute_s"] < 48 * 3600
    [slo] = [o for o in v6["slo"] if o["objective"] == "publication_lag"]
    assert (slo["met"], slo["over"]) == (True, ["arrival"])  # our build met its objective; the source is what is late

    out = run_dsv(_env(world), "status")
    assert out.returncode == 0, out.stderr
    hours = {k: f"{lag[k] / 3600:.1f} h" for k in lag}
    assert f"  lag from valid time: event {hours['event_s']} = arrival {hours['arrival_s']} (upstream) + compute {hours['compute_s']} (build)" in out.stdout
    assert "  slo publication_lag <= 48.0 h: " in out.stdout and ", met (over: arrival)" in out.stdout, out.stdout


def _reads(world: World) -> list[tuple[str, str, int, int, str]]:
    with world.registry.engine.connect() as conn:
        rows = conn.execute(text("SELECT kind, outcome, missing, corrupt, consumer FROM read_health ORDER BY id"))
        return [tuple(r) for r in rows]  # type: ignore[misc]


def test_reads_record_their_health_and_damaged_objects_are_counted(world: World) -> None:
    build = world.build("v6")
    version = world.registry.find_by_manifest_hash(build.manifest_hash).human_version  # type: ignore[union-attr]
    with open_dataset(build.ref, settings=world.settings) as ds:
        rows = ds.to_arrow().num_rows
        for _ in ds.iter_batches(batch_size=5):
            break  # a reader that stops early
    actor = world.platform.actor
    assert _reads(world) == [("to_arrow", "OK", 0, 0, actor), ("iter_batches", "STOPPED", 0, 0, actor)]
    c = _status(world)["consumption"][version]
    assert (c["consumers"], c["reads"], c["data_reads"], c["missing"], c["corrupt"]) == (1, 1, 2, 0, 0)
    assert 0 < c["ttfb_p50_s"] <= c["ttfb_max_s"] and c["bytes_per_s"] > 0 and c["rows_per_s"] > 0
    assert rows < c["data_rows"] <= 2 * rows and c["data_bytes"] > 0

    first, second = build.manifest.partitions[0], build.manifest.partitions[1]
    with corrupted(world.store, first.object), open_dataset(build.ref, settings=world.settings) as ds, pytest.raises(CorruptError, match="hash"):
        ds.to_arrow()
    world.delete_object(second.object)
    with open_dataset(build.ref, settings=world.settings) as ds, pytest.raises(CorruptError, match="missing"):
        for _ in ds.iter_partitions():
            pass
    assert _reads(world)[2:] == [("to_arrow", "CORRUPT", 0, 1, actor), ("iter_partitions", "MISSING", 1, 0, actor)]
    c = _status(world)["consumption"][version]
    assert (c["data_reads"], c["missing"], c["corrupt"]) == (4, 1, 1)

    out = run_dsv(_env(world), "status")
    assert out.returncode == 0, out.stderr
    assert f"  health of {version}: 1 consumers, 4 data reads, time to first byte p50 " in out.stdout, out.stdout
    assert "missing 1, corrupt 1" in out.stdout


def test_a_read_whose_health_cannot_be_recorded_still_reads_and_says_so(world: World, caplog: pytest.LogCaptureFixture) -> None:
    build = world.build("v6")
    with world.registry.engine.begin() as conn:
        conn.execute(text("DROP TABLE read_health"))  # the recording fails for real
    with caplog.at_level(logging.WARNING, logger="dsv_platform.services.publication.read_meter"), open_dataset(build.ref, settings=world.settings) as ds:
        assert ds.to_arrow().num_rows == build.manifest.rows
    assert any("the health of a to_arrow read was not recorded" in r.getMessage() for r in caplog.records), caplog.records


def test_a_handle_used_in_a_forked_worker_reads_without_writing_through_the_parents_connections(world: World) -> None:
    build = world.build("v6")
    with open_dataset(build.ref, settings=world.settings) as ds:
        pid = os.fork()
        if pid == 0:  # a data loader worker handed the parent's handle
            ok = ds.to_arrow().num_rows == build.manifest.rows
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # the read went on
        assert _reads(world) == []  # unrecorded: the child does not write through the parent's pooled connections
        ds.to_arrow()
    assert [r[:2] for r in _reads(world)] == [("to_arrow", "OK")]
