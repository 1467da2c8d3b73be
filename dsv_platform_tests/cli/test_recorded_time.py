"""Issue 24 item 7: the platform assigns the recorded time at landing; naming one is an operator's audited historical load.

Before: ``--recorded-at 2099-01-01`` was accepted; the row beat every later honest correction and the manifest's
watermark became 2099. By default the recorded time was the file's modification time: a file touched to 2001 was
recorded in 2001, one touched ahead beat every later batch.

``dsv`` runs in this process (:class:`DsvCli`); its exit codes and lines are the process's (stderr is no terminal either way).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.landing import LandingError, LandingRecord, LandingZone
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.landing_index import LandingIndex
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.cli.test_ingest_rejected_rows import _setup, labs
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result, without_progress
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url", "labs"]


def test_a_batch_recorded_in_the_future_is_refused_before_anything_lands(tmp_path: Path) -> None:
    from dsv_platform.examples.fraud import events
    from dsv_platform.examples.fraud.generator import FraudDomain
    from dsv_platform.examples.fraud.specs import TRANSACTIONS

    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    zone = LandingZone(store, LandingIndex(Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}").engine))
    batch = events.daily_batch(FraudDomain(rows_per_day=20), "transactions", FraudDomain().start)
    future = RawBatch(batch.source, batch.day, "from-2099", dt.datetime(2099, 1, 1, tzinfo=dt.UTC), batch.data, batch.format)
    with pytest.raises(LandingError, match="recorded time 2099-01-01T00:00:00\\+00:00 is in the future"):
        zone.land(future, TRANSACTIONS)
    assert list(store.iter_objects()) == [] and zone.records("transactions", batch.day) == []
    assert zone.land(batch, TRANSACTIONS).batch_id == batch.batch_id  # a past recorded time lands


def _records(env: dict[str, str]) -> list[LandingRecord]:
    with build_platform(load_settings(env)) as p:
        return p.landing.records("labs")


def test_dsv_ingest_refuses_a_future_recorded_at_and_audits_a_historical_one(labs: tuple[DsvCli, Path]) -> None:
    dsv, batch = labs
    env = dict(dsv.env)
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")

    def ingest(*args: str) -> Result:
        return dsv("ingest", "labs", str(batch), *args)

    future = ingest("--recorded-at", "2099-01-01T00:00:00+00:00")
    assert future.code == FailureKind.INVALID.exit_code, future.err
    [line] = without_progress(future.err)  # one typed line, before anything is validated or landed
    assert line.startswith("dsv: error: --recorded-at for labs: recorded time 2099-01-01T00:00:00+00:00 is in the future"), line
    assert _records(env) == []
    past = ingest("--recorded-at", "2026-06-02T08:00:00+00:00", "--json")
    assert past.code == 0, past.err
    assert json.loads(past.out)["files"][0]["rows_accepted"] == 1
    with build_platform(load_settings(env)) as p:
        refused, entry = [e for e in trust.records(p).audit_entries() if e["action"] == "ingest.recorded_at"]  # the refused attempt too
    assert refused["detail"]["recorded_at"] == "2099-01-01T00:00:00+00:00" and "in the future" in refused["detail"]["refused"]
    assert refused["identity"] == "admin"  # the command's identity refused it; its run lands as the service identity (docs/trust.md)
    assert (entry["target"], entry["identity"]) == ("source:labs", "dagster")
    assert entry["detail"] == {"recorded_at": "2026-06-02T08:00:00+00:00", "files": [str(batch.resolve())], "batches": ["labs-2026-06-01"]}
    [record] = _records(env)
    assert record.recorded_at == dt.datetime(2026, 6, 2, 8, tzinfo=dt.UTC) and record.writer == "dagster"


def test_a_historical_load_by_a_non_operator_is_refused_naming_the_identity(
    backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env, batch = _setup(tmp_path)
    env["DSV_REGISTRY_URL"] = backend_url
    dsv = DsvCli(capsys, monkeypatch, env)
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")
    assert dsv("identity", "create", "wanda").code == 0
    assert dsv("grants", "add", "wanda", "source_writer", "--source", "labs").code == 0
    done = dsv("ingest", "labs", str(batch), "--recorded-at", "2026-06-02T08:00:00+00:00", identity="wanda")
    assert done.code == FailureKind.ACCESS_DENIED.exit_code, done.err
    [line] = without_progress(done.err)
    assert line.startswith("dsv: error: ACCESS_DENIED: identity 'wanda' has no grant for role 'operator'"), line
    assert _records(env) == []
    landed = dsv("ingest", "labs", str(batch), identity="wanda")  # without a claimed time the writer lands, at the platform's clock
    assert landed.code == 0, landed.err
    assert [r.writer for r in _records(env)] == ["wanda"]


def test_the_recorded_time_is_the_platform_clock_at_landing_not_the_file_time(labs: tuple[DsvCli, Path]) -> None:
    dsv, batch = labs
    env = dict(dsv.env)
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")
    ahead = batch.with_name("labs-ahead.csv")
    ahead.write_text("result_id,day,analyte,value\n2,2026-06-01,K,4.1\n")
    os.utime(batch, (dt.datetime(2001, 1, 1, tzinfo=dt.UTC).timestamp(),) * 2)  # whoever writes the file sets these
    os.utime(ahead, ((dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).timestamp(),) * 2)
    before = dt.datetime.now(dt.UTC)
    done = dsv("ingest", "labs", str(batch), str(ahead))
    after = dt.datetime.now(dt.UTC)
    assert done.code == 0, done.err
    records = _records(env)
    assert len(records) == 2 and all(before <= r.recorded_at == r.landed_at <= after for r in records), records
    with build_platform(load_settings(env)) as p:
        assert not [e for e in trust.records(p).audit_entries() if e["action"] == "ingest.recorded_at"], "no claimed time: no historical load"
    again = dsv("ingest", "labs", str(batch), "--json")  # the same bytes, later: already landed, not a new batch
    assert again.code == 0, again.err
    assert json.loads(again.out)["files"][0]["batch_ids"] == ["labs-2026-06-01"]
    assert _records(env) == records
