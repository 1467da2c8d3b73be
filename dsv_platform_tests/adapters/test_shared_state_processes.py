"""Shared state in the right place (issue 26 item 4), with two OS processes on PostgreSQL + S3.

Each process has its own ``DSV_HOME`` (nothing is shared through a home folder): one registry on PostgreSQL holds
the landing index, objects are in the loopback S3 server, keys in a PostgreSQL key store of their own
(``DSV_KEY_STORE``). Two processes landing the same batches at once converge to one record each and one key each;
a batch id landed with different bytes at once is LANDED once and REVISED once; keys one process made decrypt for
the other; a crypto-erasure through the key store makes the object unreadable in both.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore
from dsv_platform.bootstrap import build_landing
from dsv_platform.settings import load_settings
from dsv_platform_tests.adapters import shared_state_worker as worker
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.fixtures.postgres_server import PostgresServer

pytestmark = [pytest.mark.postgres, pytest.mark.s3]
TIMEOUT = 300


@pytest.fixture
def shared(postgres_server: PostgresServer, s3_env: Any, tmp_path: Path) -> dict[str, str]:
    """The variables every process shares (each adds its own DSV_HOME); this process's AWS_* variables too (s3_env)."""
    s3_server = s3_env
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "AWS_"))}
    return {
        **base,
        **s3_server.env(),
        "DSV_REGISTRY_URL": postgres_server.url(postgres_server.create_database()),
        "DSV_KEY_STORE": postgres_server.url(postgres_server.create_database()),
        "DSV_OBJECT_STORE": f"s3://{s3_server.create_bucket()}/dsv",
        "DSV_S3_ENDPOINT_URL": s3_server.endpoint_url,
        "DSV_ICEBERG_CATALOG_URL": f"sqlite:///{tmp_path / 'catalog.db'}",
        "DSV_ICEBERG_WAREHOUSE": str(tmp_path / "warehouse"),
    }


def _start(env: dict[str, str], home: Path, *args: str) -> forked.Worker:
    """The worker as an OS process of its own with only ``env`` (forked from the preloaded server: fixtures/forked.py)."""
    return forked.Worker(worker.main, args, env={**env, "DSV_HOME": str(home)})


def _result(proc: forked.Worker) -> Any:
    code, out = proc.communicate(timeout=TIMEOUT)
    assert code == 0, out[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_two_processes_share_one_landing_index_and_one_key_store(shared: dict[str, str], tmp_path: Path) -> None:
    go = tmp_path / "go"
    homes = [tmp_path / "host-a", tmp_path / "host-b"]
    procs = [_start(shared, home, "land", str(i), str(go)) for i, home in enumerate(homes)]
    go.touch()
    reports = [_result(p) for p in procs]

    settings = load_settings({**shared, "DSV_HOME": str(tmp_path / "observer")})
    zone = build_landing(settings)
    records = zone.records()
    keys = Counter((r.day, r.batch_id, r.digest) for r in records)
    assert set(keys.values()) == {1}, "one record per batch, day and bytes"
    assert len(records) == len(worker.DAYS) + 2  # the shared days, and the contested batch's two byte strings
    for i, day in enumerate(worker.DAYS):  # each shared batch: landed by one process, unchanged for the other
        outcomes = sorted(report[i + 1 if n == 0 else len(worker.DAYS) - i]["status"] for n, report in enumerate(reports))
        assert outcomes == ["landed", "unchanged"], (day, outcomes)
    contested = sorted(r.status.value for r in records if r.batch_id == "contested")
    assert contested == ["landed", "revised"], "different bytes of one batch id at once: one LANDED, one REVISED"
    assert {r["status"] for report in reports for r in report if r["batch_id"] == "contested"} == {"landed", "revised"}
    for report in reports:  # what each process was told is what the index holds
        by_key = {(r.day.isoformat(), r.batch_id, r.digest): r.seq for r in records}
        assert all(by_key[(r["day"], r["batch_id"], r["digest"])] == r["seq"] for r in report)

    keys_store = zone.store.keys  # type: ignore[attr-defined]
    assert isinstance(keys_store, PostgresKeyStore)
    assert set(keys_store.digests()) == {r.digest for r in records}, "one key per object, in the key store's own database"
    assert not any((home / "keys").exists() for home in homes), "no key under a home"

    reads = [_result(_start(shared, home, "read", "0", str(go))) for home in homes]  # keys one process made, found by the other
    assert reads == [{r.digest: "ok" for r in records}] * 2

    erased = records[0]
    assert zone.store.erase(erased.digest) is not None  # type: ignore[attr-defined]
    zone.mark_redacted(erased.digest, 1, "privacy deletion")
    procs = [_start(shared, home, "read", "0", str(go)) for home in homes]
    reads = [_result(p) for p in procs]
    expected = {r.digest: "ok" for r in records} | {erased.digest: "erased redacted"}
    assert reads == [expected] * 2, "erased through the PostgreSQL key store: unreadable from both processes"
    with keys_store.engine.connect() as conn:
        from sqlalchemy import text

        assert conn.execute(text("SELECT COUNT(*) FROM dsv_object_keys WHERE digest = :d"), {"d": erased.digest}).scalar_one() == 0
    keys_store.close()
