"""Issue 11 item 5 on the production resource set: registry on PostgreSQL, objects on the loopback S3 server.

A subset of the kill points of test_kill_safety_{gc,privacy,publish}.py (runtime):
`dsv gc apply` mid-delete, `dsv privacy delete` mid-delete and a publication
mid-commit, each SIGKILLed in a real subprocess, rerun, then checked by the
integrity scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform_tests.fixtures.postgres_server import PostgresServer
from dsv_platform_tests.fixtures.s3_server import S3Server
from dsv_platform_tests.services import kill_support as ks

pytestmark = [pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]


@pytest.fixture
def env(tmp_path: Path, postgres_server: PostgresServer, s3_env: S3Server) -> dict[str, str]:
    return ks.production_env(tmp_path, postgres_server, s3_env)


def test_gc_apply_killed_mid_delete_on_postgresql_and_s3(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ks.check_gc_apply_killed(env, "object_deleted", monkeypatch)


def test_privacy_delete_killed_mid_delete_on_postgresql_and_s3(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ks.check_privacy_delete_killed(env, "outcome", monkeypatch)


def test_publication_killed_mid_commit_on_postgresql_and_s3(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    ks.check_publication_killed(env, "sealed", monkeypatch)
