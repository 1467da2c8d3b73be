"""The composition root: the CLI and a Dagster run see one registry, one object store and one key store per environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.adapters.registry import migrations
from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.cli.context import open_platform
from dsv_platform.defs.resources import PlatformResource, build_resources
from dsv_platform.settings import load_settings

SEEN: list[Platform] = []


@dg.asset
def where_am_i(platform: PlatformResource) -> dg.MaterializeResult:
    """Writes one object through the Dagster path and records where it looked."""
    p = platform.get()
    SEEN.append(p)
    digest = p.store.put(b"written by a dagster run")
    return dg.MaterializeResult(metadata={"digest": digest, **{k: dg.MetadataValue.text(v) for k, v in p.describe().items()}})


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {"DSV_HOME": str(tmp_path / "home"), "DSV_KEY_STORE": str(tmp_path / "vault" / "keys"), "DSV_ACTOR": "tester"}
    for name in ("DSV_REGISTRY_URL", "DSV_OBJECT_STORE", "DSV_ICEBERG_CATALOG_URL", "DSV_ICEBERG_WAREHOUSE", "DSV_DROP_FOLDER", "DSV_S3_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def _materialize(settings_env: dict[str, str]) -> dict[str, str]:
    resources = build_resources(load_settings(settings_env))
    result = dg.materialize([where_am_i], resources={"platform": resources["platform"]}, instance=dg.DagsterInstance.ephemeral())
    assert result.success
    [mat] = result.asset_materializations_for_node("where_am_i")
    return {k: v.value for k, v in mat.metadata.items()}


def test_cli_and_dagster_see_the_same_key_store_registry_and_objects(env: dict[str, str], tmp_path: Path) -> None:
    SEEN.clear()
    dagster_side = _materialize(env)
    with open_platform() as cli_side:
        described = cli_side.describe()
        assert {k: dagster_side[k] for k in described} == described
        assert described["key_store"] == str((tmp_path / "vault" / "keys").resolve())
        # written (encrypted) by the run, read back and decrypted by the CLI's platform
        assert cli_side.store.is_encrypted(dagster_side["digest"])
        assert cli_side.store.get(dagster_side["digest"]) == b"written by a dagster run"
    assert not (Path(env["DSV_HOME"]) / "keys").exists(), "nothing may fall back to the default key store"
    assert [p.closed for p in SEEN] == [True], "the resource closes its platform after the run"


def test_a_real_cli_process_reads_the_registry_the_run_wrote(env: dict[str, str]) -> None:
    with build_platform(load_settings(env)) as platform:
        rid = platform.registry.add_retention_root("model_version", "fraud_training_set:v6", "kept by the dagster side", "tester", None)
    code = "from dsv_platform.cli.main import main; raise SystemExit(main(['retention', 'list', '--json']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**env, "PATH": "/usr/bin:/bin"})
    assert f'"id": {rid}' in out.stdout and "kept by the dagster side" in out.stdout


def test_migrations_run_once_per_platform(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    real = migrations.upgrade
    monkeypatch.setattr(migrations, "upgrade", lambda engine, *a, **k: calls.append(engine) or real(engine, *a, **k))
    with build_platform(load_settings(env)) as platform:
        for _ in range(3):
            platform.registry.versions("fraud_training_set")
            platform.registry.redaction_generation()
        assert platform.store is platform.store and platform.landing is platform.landing
    assert len(calls) == 1


def test_close_disposes_the_registry_engine(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    platform = build_platform(load_settings(env))
    disposed: list[bool] = []
    engine = platform.registry.engine
    real = engine.dispose
    monkeypatch.setattr(engine, "dispose", lambda *a, **k: disposed.append(True) or real(*a, **k))
    with platform:
        assert not platform.closed
    assert platform.closed and disposed == [True]
    platform.close()  # idempotent
    assert disposed == [True]


def test_tables_are_built_lazily(env: dict[str, str]) -> None:
    with build_platform(load_settings(env)) as platform:
        assert platform._tables is None
        assert platform.tables is platform.tables
