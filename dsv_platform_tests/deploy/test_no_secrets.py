"""Issue 26 item 3: no secret reaches the UI, the run storage, the logs, OpenLineage events or an error line.

A production-shaped deployment, configured only by environment variables: the registry and the Iceberg catalog on
the suite's PostgreSQL with passwords in their URLs (the server trusts, so any password connects), objects and
tables in the loopback S3 server with the secret key in ``AWS_SECRET_ACCESS_KEY`` and ``DSV_CATALOG_S3__*``. The
Definitions are built as ``dsv_platform.definitions`` builds them; the repository snapshot the webserver shows,
every event, tag, config and snapshot of a real ingest run on a Dagster instance, the Python log records and the
process output, the OpenLineage events, a run that fails on an unreachable registry, and ``dsv`` error lines are
searched for every secret.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._core.snap import JobSnap
from dagster._serdes import serialize_value

from dsv_platform.adapters.lineage import openlineage as ol
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import CONFIG_DIR, events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import load_settings
from dsv_platform_tests.defs.support import drop
from dsv_platform_tests.interop.collector import Collector, collector

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

SECRETS = ("SECRET-REGISTRY-pw", "SECRET-CATALOG-pw", "SECRET-AWS-key", "SECRET-CATPROP-key", "SECRET-WEBSERVER-pw")
DAY = "2026-06-01"
DSV = str(Path(sys.executable).with_name("dsv"))


def _with_password(url: str, password: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{password}@{host}"


@pytest.fixture
def secret_env(tmp_path: Path, postgres_server: Any, s3_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, str], Collector]]:
    """The deployment's variables (also set in this process: the S3 clients and the OpenLineage client read them)."""
    bucket = s3_env.create_bucket()
    with collector() as found:
        env = {
            "DSV_HOME": str(tmp_path / "dsv"),
            "DSV_DROP_FOLDER": str(tmp_path / "drop"),
            "DSV_REGISTRY_URL": _with_password(postgres_server.url(postgres_server.create_database()), SECRETS[0]),
            "DSV_ICEBERG_CATALOG_URL": _with_password(postgres_server.url(postgres_server.create_database()), SECRETS[1]),
            "DSV_OBJECT_STORE": f"s3://{bucket}/dsv",
            "DSV_ICEBERG_WAREHOUSE": f"s3://{bucket}/warehouse",
            "DSV_S3_ENDPOINT_URL": s3_env.endpoint_url,
            "DSV_S3_REGION": s3_env.region,
            "DSV_CATALOG_S3__ACCESS_KEY_ID": s3_env.access_key,
            "DSV_CATALOG_S3__SECRET_ACCESS_KEY": SECRETS[3],
            "AWS_SECRET_ACCESS_KEY": SECRETS[2],  # moto takes any key
            "DSV_ACTOR": "secrets-test",
            "OPENLINEAGE_URL": found.url,
        }
        for k in [k for k in os.environ if k.startswith(("DSV_", "OPENLINEAGE"))]:
            monkeypatch.delenv(k)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        ol.EMITTER.reset()
        yield env, found
        ol.EMITTER.reset()


def _leaks(where: str, text: str) -> list[str]:
    return [f"{secret} in {where}" for secret in SECRETS if secret in text]


def _instance_record(instance: dg.DagsterInstance) -> str:
    """Everything the instance stores of its runs: the runs (tags, config), their job and plan snapshots, every event."""
    parts = []
    for run in instance.get_runs():
        parts += [serialize_value(run), serialize_value(instance.get_job_snapshot(run.job_snapshot_id))]
        if run.execution_plan_snapshot_id:
            parts.append(serialize_value(instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)))
        parts += [serialize_value(e) for e in instance.all_logs(run.run_id)]
    return "\n".join(parts)


def test_no_secret_in_the_snapshots_of_the_whole_definitions(tmp_path: Path) -> None:
    """The fraud example's Definitions on the Celery executor, every URL and credential set: neither the repository
    snapshot nor any job's snapshot (what the webserver shows) holds one; the resource has no config at all."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    with (config / "platform.yaml").open("a") as f:
        f.write("executor: celery\n")
    env = {
        "DSV_HOME": str(tmp_path / "dsv"),
        "DSV_CONFIG_DIR": str(config),
        "DSV_REGISTRY_URL": f"postgresql+psycopg2://dsv:{SECRETS[0]}@db:5432/dsv",
        "DSV_ICEBERG_CATALOG_URL": f"postgresql+psycopg2://dsv:{SECRETS[1]}@db:5432/catalog",
        "DSV_CATALOG_S3__SECRET_ACCESS_KEY": SECRETS[3],
        "DSV_OBJECT_STORE": "s3://bucket/dsv",
        "DSV_CELERY_BROKER_URL": f"redis://:{SECRETS[2]}@redis:6379/0",
        "DSV_DAGSTER_URL": f"http://ops:{SECRETS[4]}@dagster:3000",  # dsv build/ingest --submit's webserver
    }
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSV_CELERY_BROKER_URL", env["DSV_CELERY_BROKER_URL"])
        defs = build_defs(load_settings(env))
        repository = defs.get_repository_def()
        snapshot = serialize_value(RepositorySnap.from_def(repository))
        jobs = {job.name: serialize_value(JobSnap.from_job_def(job)) for job in repository.get_all_jobs()}
    assert "publish_fraud_training_set_v6" in snapshot and "PlatformResource" in snapshot and len(jobs) > 5
    leaks = _leaks("the repository snapshot", snapshot) + [leak for name, text in jobs.items() for leak in _leaks(f"job {name}", text)]
    assert leaks == [] and "db:5432" not in snapshot
    shown = repr(load_settings(env))
    assert _leaks("the repr of Settings", shown) == []
    assert "postgresql+psycopg2://dsv:***@db:5432/dsv" in shown and "('s3.secret-access-key', '***')" in shown
    assert "dagster_url='http://ops:***@dagster:3000'" in shown


@pytest.mark.slow  # a real ingest run, then a failing one through its three retries (about 90 s)
def test_no_secret_in_the_snapshot_runs_logs_lineage_or_errors(
    secret_env: tuple[dict[str, str], Collector], tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    env, found = secret_env
    caplog.set_level(logging.DEBUG)
    settings = load_settings()
    assert settings.registry_url == env["DSV_REGISTRY_URL"] and dict(settings.catalog)["s3.secret-access-key"] == SECRETS[3]
    defs = build_defs(settings)  # as dsv_platform/definitions.py builds them in the code server and in every run worker
    leaks = _leaks("the repository snapshot", serialize_value(RepositorySnap.from_def(defs.get_repository_def())))
    leaks += _leaks("the repr of Settings", repr(settings) + str(settings))

    drop(settings.drop_folder, [events.daily_batch(FraudDomain(rows_per_day=30), "transactions", dt.date.fromisoformat(DAY))])
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        done = dg.materialize(
            defs.assets, selection='key:"raw/transactions" or key:"canonical/transactions"', partition_key=DAY, instance=instance, resources=defs.resources
        )
        assert done.success
        assert {e.asset_key.to_user_string() for e in done.get_asset_materialization_events()} >= {"raw/transactions", "canonical/transactions"}
        # the same deployment with its registry gone: the failure (message and stack) is stored in the run's events
        gone = dataclasses.replace(settings, registry_url=_with_password("postgresql+psycopg2://dsv@127.0.0.1:9/dsv", SECRETS[0]))
        failed = dg.materialize(
            defs.assets, selection="raw/transactions", partition_key=DAY, instance=instance, resources=build_defs(gone).resources, raise_on_error=False
        )
        assert not failed.success
        failure = next(e for e in failed.all_events if e.is_step_failure)
        assert "127.0.0.1:9" in str(failure.step_failure_data.error), "the failure names the registry"
        leaks += _leaks("the Dagster instance (runs, tags, config, snapshots, events)", _instance_record(instance))

    assert found.events, "OpenLineage events were emitted"
    leaks += _leaks("OpenLineage events", repr(found.events))
    leaks += _leaks("log records", "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records))
    out, err = capfd.readouterr()
    leaks += _leaks("stdout/stderr", out + err)

    # error lines of the CLI: an unreachable registry, a catalog URL `dsv home relocate` refuses
    bad = {**os.environ, "DSV_REGISTRY_URL": gone.registry_url}
    for args, env_ in ((["status"], bad), (["home", "relocate"], dict(os.environ))):
        ran = subprocess.run([DSV, *args], env=env_, capture_output=True, text=True, timeout=120)
        assert ran.returncode != 0 and ran.stderr.strip(), (args, ran.stdout, ran.stderr)
        leaks += _leaks(f"dsv {' '.join(args)}", ran.stdout + ran.stderr)
    assert leaks == [], "\n".join(leaks)
