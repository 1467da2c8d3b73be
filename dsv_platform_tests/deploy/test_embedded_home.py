"""The embedded default's Dagster home gets a dagster.yaml with telemetry disabled, written only when absent (`dsv`, the demo)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.cli.runs import DAGSTER_YAML, ensure_dagster_yaml, open_instance
from dsv_platform.examples.fraud.demo_home import prepare_home
from dsv_platform.settings import load_settings

USERS = "telemetry:\n  enabled: true\nretention:\n  schedule:\n    purge_after_days: 7\n"


def test_written_when_absent_and_loaded_with_telemetry_off(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    assert ensure_dagster_yaml(home) is True
    assert (home / "dagster.yaml").read_text() == DAGSTER_YAML
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.telemetry_enabled is False
    assert ensure_dagster_yaml(home) is False  # idempotent


def test_a_users_dagster_yaml_is_never_overwritten(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(USERS)
    assert ensure_dagster_yaml(home) is False
    assert (home / "dagster.yaml").read_text() == USERS


@pytest.mark.parametrize("existing", [None, USERS])
def test_the_demo_prepares_the_dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: str | None) -> None:
    for name in ("DSV_REGISTRY_URL", "DSV_OBJECT_STORE", "DSV_ICEBERG_CATALOG_URL", "DSV_ICEBERG_WAREHOUSE", "DSV_CONFIG_DIR", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "dsv"))
    if existing is not None:
        (tmp_path / "dsv" / "dagster").mkdir(parents=True)
        (tmp_path / "dsv" / "dagster" / "dagster.yaml").write_text(existing)
    assert prepare_home() is False  # a fresh home
    assert (tmp_path / "dsv" / "dagster" / "dagster.yaml").read_text() == (existing or DAGSTER_YAML)


def test_the_cli_instance_gets_one_too(tmp_path: Path) -> None:
    settings = load_settings({}).with_home(tmp_path / "dsv")
    with open_instance(settings) as instance:
        assert instance.telemetry_enabled is False
    assert (settings.dagster_home / "dagster.yaml").read_text() == DAGSTER_YAML
