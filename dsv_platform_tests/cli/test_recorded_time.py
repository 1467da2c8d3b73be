"""Issue 24 item 7 (in part): the writer cannot choose a future recorded time, and naming one is an audited operator act.

Before: ``--recorded-at 2099-01-01`` was accepted; the row beat every later honest correction and the manifest's
watermark became 2099. A file's modification time in the future did the same silently.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.landing import LandingError, LandingZone
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.cli.test_ingest_rejected_rows import _setup
from dsv_platform_tests.fixtures.cli_runner import run_dsv, without_progress


def test_a_batch_recorded_in_the_future_is_refused_before_anything_lands(tmp_path: Path) -> None:
    from dsv_platform.examples.fraud import events
    from dsv_platform.examples.fraud.generator import FraudDomain
    from dsv_platform.examples.fraud.specs import TRANSACTIONS

    store = LocalObjectStore(tmp_path / "objects", fsync=False)
    zone = LandingZone(store, tmp_path / "landing.db")
    batch = events.daily_batch(FraudDomain(rows_per_day=20), "transactions", FraudDomain().start)
    future = RawBatch(batch.source, batch.day, "from-2099", dt.datetime(2099, 1, 1, tzinfo=dt.UTC), batch.data, batch.format)
    with pytest.raises(LandingError, match="recorded time 2099-01-01T00:00:00\\+00:00 is in the future"):
        zone.land(future, TRANSACTIONS)
    assert list(store.iter_objects()) == [] and zone.records("transactions", batch.day) == []
    assert zone.land(batch, TRANSACTIONS).batch_id == batch.batch_id  # a past recorded time lands


def test_dsv_ingest_refuses_a_future_recorded_at_and_audits_a_historical_one(tmp_path: Path) -> None:
    env, batch = _setup(tmp_path)
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")
    def ingest(*args: str) -> subprocess.CompletedProcess[str]:
        return run_dsv(env, "ingest", "labs", str(batch), *args)

    future = ingest("--recorded-at", "2099-01-01T00:00:00+00:00")
    assert future.returncode != 0 and "is in the future" in future.stderr, future.stderr
    assert len(without_progress(future.stderr)) == 1  # the stage that passed (validate), then one error line
    past = ingest("--recorded-at", "2026-06-02T08:00:00+00:00", "--json")
    assert past.returncode == 0, past.stderr
    assert json.loads(past.stdout)["files"][0]["rows_accepted"] == 1
    with build_platform(load_settings(env)) as p:
        refused, entry = [e for e in trust.records(p).audit_entries() if e["action"] == "ingest.recorded_at"]  # the refused attempt too
    assert refused["detail"]["recorded_at"] == "2099-01-01T00:00:00+00:00"
    assert entry["target"] == "source:labs" and entry["detail"]["recorded_at"] == "2026-06-02T08:00:00+00:00" and entry["identity"]


def test_a_file_modified_in_the_future_is_refused(tmp_path: Path) -> None:
    env, batch = _setup(tmp_path)
    batch.write_text("result_id,day,analyte,value\n1,2026-06-01,Na,140.0\n")
    ahead = (dt.datetime.now(dt.UTC) + dt.timedelta(days=30)).timestamp()
    os.utime(batch, (ahead, ahead))
    done = run_dsv(env, "ingest", "labs", str(batch))
    assert done.returncode != 0 and "is in the future" in done.stderr, done.stderr
