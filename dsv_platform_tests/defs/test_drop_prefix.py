"""The drop sensor on an S3 prefix (issue 26 item 11): ``DSV_DROP_FOLDER=s3://bucket/prefix`` on the suite's loopback S3 server.

The same cursor, run keys, asset selection and run config as the drop folder (test_drop_sensor.py); a changed object is
downloaded (streamed to a temporary file) and scanned, an unchanged one is not; the run downloads what it lands.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.adapters.objects.drop_prefix import S3DropPrefix
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.ingest.batch import RawBatch, arrival_time, batch_of
from dsv_platform.defs import build_defs
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.defs.support import ROWS_PER_DAY, settings_at
from dsv_platform_tests.fixtures.s3_server import S3Server

pytestmark = pytest.mark.s3

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)
D1, D2, D3 = DOMAIN.days(3)
LATE = 7
Env = tuple[Settings, dg.Definitions, dg.DagsterInstance, S3Server, str]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_env: S3Server) -> Iterator[Env]:
    """The embedded default under ``tmp_path/dsv`` with its drop location ``s3://<a fresh bucket>/drop`` on the loopback server."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    bucket = s3_env.create_bucket()
    settings = dataclasses.replace(settings_at(tmp_path / "dsv"), drop_url=f"s3://{bucket}/drop", s3_endpoint_url=s3_env.endpoint_url)
    with dg.DagsterInstance.ephemeral() as instance:
        yield settings, build_defs(settings), instance, s3_env, bucket


def _put(s3: S3Server, bucket: str, batches: list[RawBatch]) -> list[str]:
    for b in batches:
        s3.client().put_object(Bucket=bucket, Key=f"drop/{b.file_name}", Body=b.data)
    return [b.file_name for b in batches]


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None = None) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, resources={"platform": defs.resources["platform"]}, cursor=cursor) as ctx:
        result = defs.resolve_sensor_def("drop_folder_sensor")(ctx)
    assert isinstance(result, dg.SensorResult)
    return result


def _daily(day: Any, batch_id: str = "b") -> RawBatch:
    return batch_of(DOMAIN.transactions(day), source="transactions", day=day, batch_id=batch_id, recorded_at=arrival_time(day))


def _mixed() -> RawBatch:
    """D3's transactions and LATE transactions of D1 (new ids): an object named for D3 touching D1 and D3."""
    late = DOMAIN.transactions(D1).slice(0, LATE)
    late = late.set_column(0, "transaction_id", pa.array(late.column("transaction_id").to_numpy() + 9_000_000, pa.int64()))
    return batch_of(pa.concat_tables([DOMAIN.transactions(D3), late]), source="transactions", day=D3, batch_id="mixed", recorded_at=arrival_time(D3))


def test_the_drop_folder_setting_takes_an_s3_prefix() -> None:
    s = load_settings({"DSV_DROP_FOLDER": "s3://landing/drop/"})
    assert s.drop_url == "s3://landing/drop" and s.drop_folder == load_settings({}).drop_folder
    assert load_settings({"DSV_DROP_FOLDER": "/srv/drop"}).drop_url is None
    with pytest.raises(Exception, match="DSV_DROP_FOLDER"):
        load_settings({"DSV_DROP_FOLDER": "gs://elsewhere/drop"})


def test_objects_under_the_prefix_request_every_day_they_touch_and_a_run_lands_them(env: Env) -> None:
    settings, defs, instance, s3, bucket = env
    first, second, mixed = _put(s3, bucket, [_daily(D1), _daily(D2), _mixed()])
    s3.client().put_object(Bucket=bucket, Key=f"drop-other/{_daily(D2, 'x').file_name}", Body=_daily(D2, "x").data)  # shares the prefix's text only
    requests = {r.run_key: r for r in _tick(defs, instance).run_requests}
    by_file = {r.tags["dsv/drop_file"]: r for r in requests.values()}
    assert sorted(by_file) == sorted([first, second, mixed])
    assert (by_file[first].partition_key, by_file[second].partition_key) == (D1.isoformat(), D2.isoformat())
    req = by_file[mixed]
    assert req.partition_key is None and (req.tags[RANGE_START], req.tags[RANGE_END]) == (D1.isoformat(), D3.isoformat()), req.tags
    assert req.job_name == "daily_ingest_job" and req.run_config["ops"]["raw__transactions"]["config"]["files"] == [mixed]
    assert req.run_key == f"{mixed}@{req.tags['dsv/digest']}"  # the folder variant's run key: the name and the bytes' SHA-256
    result = dg.materialize(
        [*defs.assets], selection=["raw/transactions", "canonical/transactions"], tags=dict(req.tags), run_config=req.run_config,
        instance=instance, resources=defs.resources,
    )  # fmt: skip
    assert result.success
    with build_platform(settings) as p:
        rows = p.tables.read(p.config.sources["transactions"])
        [record] = [r for r in p.landing.records("transactions", D3)]
    days = pc.value_counts(rows.column("event_date")).to_pylist()
    assert {d["values"]: d["counts"] for d in days} == {D1: LATE, D3: ROWS_PER_DAY}, "the late rows of D1 loaded with the object named for D3"
    assert record.digest == req.tags["dsv/digest"], "the run landed the very bytes the sensor scanned"


def test_an_unchanged_object_is_not_downloaded_a_changed_one_is_and_the_cursor_is_bounded(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    _, defs, instance, s3, bucket = env
    first, second = _put(s3, bucket, [_daily(D1), _daily(D2)])
    s3.client().put_object(Bucket=bucket, Key="drop/notes.txt", Body=b"not a batch")
    downloads: list[str] = []
    real = S3DropPrefix.download
    monkeypatch.setattr(S3DropPrefix, "download", lambda self, name, folder: downloads.append(name) or real(self, name, folder))
    tick = _tick(defs, instance)
    assert sorted(r.partition_key or "" for r in tick.run_requests) == [D1.isoformat(), D2.isoformat()]
    assert sorted(downloads) == sorted([first, second, "notes.txt"]) and sorted(json.loads(tick.cursor or "")) == sorted(downloads)

    downloads.clear()
    again = _tick(defs, instance, tick.cursor)
    assert again.run_requests == [] and downloads == [], downloads  # same size, ETag and LastModified: not downloaded

    changed = batch_of(DOMAIN.transactions(D2).slice(0, 50), source="transactions", day=D2, batch_id="b", recorded_at=arrival_time(D2))
    assert changed.file_name == second and changed.data != _daily(D2).data
    s3.client().put_object(Bucket=bucket, Key=f"drop/{second}", Body=changed.data)  # new bytes under the same key
    [request] = (after := _tick(defs, instance, again.cursor)).run_requests
    assert downloads == [second] and request.tags["dsv/drop_file"] == second
    assert request.run_key != next(r.run_key for r in tick.run_requests if r.tags["dsv/drop_file"] == second)

    s3.client().delete_object(Bucket=bucket, Key=f"drop/{first}")
    s3.client().delete_object(Bucket=bucket, Key="drop/notes.txt")
    gone = json.loads(_tick(defs, instance, after.cursor).cursor or "")
    assert sorted(gone) == [second], "an object no longer under the prefix leaves the cursor: bounded by the prefix, not its history"


HOSTILE = {  # the cursor entry of each hostile key under drop/, and what its reason says
    "../": "a sub-prefix",  # drop/../escape.csv, listed as the sub-prefix drop/../
    "sub/": "a sub-prefix",
    "..": "not a file name",
    "x" * 300 + ".csv": "not a file name",
}


def test_keys_escaping_the_prefix_or_no_file_name_are_never_downloaded_and_logged_once(
    env: Env, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _, defs, instance, s3, bucket = env
    data = _daily(D1).data
    for key in ("drop/../escape.csv", f"drop/sub/{_daily(D1).file_name}", "drop/..", "drop/" + "x" * 300 + ".csv"):
        s3.client().put_object(Bucket=bucket, Key=key, Body=data)
    downloads: list[str] = []
    real = S3DropPrefix.download
    monkeypatch.setattr(S3DropPrefix, "download", lambda self, name, folder: downloads.append(name) or real(self, name, folder))
    tick = _tick(defs, instance)
    assert tick.run_requests == [] and downloads == []
    cursor = json.loads(tick.cursor or "")
    logged = capfd.readouterr().err
    assert sorted(cursor) == sorted(HOSTILE), cursor
    for name, reason in HOSTILE.items():
        assert reason in cursor[name], (name, cursor[name])
    assert logged.count("skipped, never landed") == len(cursor), logged
    assert _tick(defs, instance, tick.cursor).run_requests == []
    assert "skipped, never landed" not in capfd.readouterr().err, "logged once per entry, not every tick"


def test_a_run_naming_an_escaping_key_lands_nothing(env: Env) -> None:
    settings, defs, instance, s3, bucket = env
    s3.client().put_object(Bucket=bucket, Key="escape.csv", Body=_daily(D1).data)
    for bad in ("../escape.csv", "sub/escape.csv"):
        result = dg.materialize(
            [*defs.assets], selection="raw/transactions", partition_key=D1.isoformat(), instance=instance, resources=defs.resources,
            run_config={"ops": {"raw__transactions": {"config": {"files": [bad]}}}}, raise_on_error=False,
        )  # fmt: skip
        assert not result.success
        [failure] = [e for e in result.all_events if e.is_step_failure]
        assert "not directly under the drop prefix" in str(failure.event_specific_data), failure
    with build_platform(settings) as p:
        landing = p.existing_landing()
        assert landing is None or landing.records("transactions", D1) == []


def test_a_run_naming_no_file_lands_the_objects_of_its_day(env: Env) -> None:
    settings, defs, instance, s3, bucket = env
    [day_one, _] = _put(s3, bucket, [_daily(D1), _daily(D2)])
    s3.client().put_object(Bucket=bucket, Key=f"drop/sub/{_daily(D1, 'nested').file_name}", Body=_daily(D1, "nested").data)
    result = dg.materialize([*defs.assets], selection="raw/transactions", partition_key=D1.isoformat(), instance=instance, resources=defs.resources)
    assert result.success  # the schedule's run: no files in its config, the day's objects directly under the prefix
    with build_platform(settings) as p:
        assert [r.batch_id for r in p.landing.records("transactions", D1)] == ["b"], day_one
        assert p.landing.records("transactions", D2) == []
