"""The production instance's environment, shared by the deployment tests (only environment variables, as deploy/README.md says)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsv_platform_tests.deploy.cluster import dagster_home
from dsv_platform_tests.fixtures.production_stores import production_stores


@pytest.fixture
def production_env(tmp_path: Path, postgres_server: Any, s3_env: Any) -> dict[str, str]:
    """Only environment variables: Dagster's instance database and log bucket, the platform's PostgreSQL and S3 stores."""
    logs = s3_env.create_bucket()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "DAGSTER_"))}  # carries s3_env's AWS_*
    return inherited | production_stores(postgres_server, s3_env) | {
        "DAGSTER_HOME": str(dagster_home(tmp_path)),
        "DAGSTER_PG_HOST": postgres_server.host,
        "DAGSTER_PG_PORT": str(postgres_server.port),
        "DAGSTER_PG_USER": postgres_server.user,
        "DAGSTER_PG_PASSWORD": "unused-trust-auth",
        "DAGSTER_PG_DB": postgres_server.create_database(),
        "DSV_COMPUTE_LOG_BUCKET": logs,
        "DSV_HOME": str(tmp_path / "dsv"),
        "DSV_DROP_FOLDER": str(tmp_path / "drop"),
        "DSV_ACTOR": "production-instance-test",
    }
