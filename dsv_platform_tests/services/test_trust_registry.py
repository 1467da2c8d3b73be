"""Issue 24 items 1 and 2: strictness and bootstrap are properties of the registry; Dagster run config never picks the identity.

On the real registries (SQLite and PostgreSQL): an insider with the registry URL and a fresh ``DSV_HOME`` (so a fresh
key folder) tries to mint an admin; a Launchpad user tries to run as another identity through run config.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.adapters.registry.trust import BOOTSTRAP_PROPERTY, STRICT_PROPERTY
from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import AccessDeniedError, ConfigurationError, EnvironmentSetupError
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.defs.resources import SERVICE_IDENTITY, PlatformResource
from dsv_platform.services.trust import trust
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


def home_on(registry_url: str, home: Path, **env: str) -> Settings:
    return replace(load_settings({"DSV_HOME": str(home), **env}), registry_url=registry_url)


def _strict_operator(url: str, home: Path) -> None:
    """What ``dsv init --strict --admin boss`` leaves: a strict registry whose one identity is operator ``boss``."""
    with build_platform(home_on(url, home, DSV_STRICT="1", DSV_IDENTITY="boss")) as p:
        trust.mark_strict(p)
        trust.create_identity(p, "boss", by="boss")
        trust.records(p).change_grant(Grant("boss", Role.OPERATOR), add=True, by="boss")


def test_a_fresh_home_without_dsv_strict_mints_no_admin_on_a_strict_registry(backend_url: str, tmp_path: Path) -> None:
    _strict_operator(backend_url, tmp_path / "operator")
    with build_platform(home_on(backend_url, tmp_path / "intruder")) as p:  # no DSV_STRICT, no STRICT marker, its own key folder
        before = len(trust.records(p).audit_entries())
        assert trust.is_strict(p), "the registry is strict, whatever this home says"
        with pytest.raises(AccessDeniedError, match="strict home needs an identity"):
            trust.current_identity(p)
        with build_platform(replace(p.settings, identity=SERVICE_IDENTITY)) as service, pytest.raises(AccessDeniedError, match="'dagster' is not registered"):
            trust.ensure_service_identity(service, default=SERVICE_IDENTITY)
        assert [i.name for i in trust.records(p).identities()] == ["boss"]
        assert len(trust.records(p).audit_entries()) == before
        assert not (tmp_path / "intruder" / "identities" / "admin.key").exists()
    intruder_as_admin = home_on(backend_url, tmp_path / "intruder", DSV_IDENTITY="admin")
    with build_platform(intruder_as_admin) as p, pytest.raises(AccessDeniedError, match="'admin' is not registered"):
        trust.current_identity(p)


def test_a_fresh_home_mints_nobody_on_a_bootstrapped_registry(backend_url: str, tmp_path: Path) -> None:
    with build_platform(home_on(backend_url, tmp_path / "team")) as p:
        assert trust.current_identity(p).name == "admin"  # the registry's first identity: the one bootstrap
        assert trust.records(p).registry_property(BOOTSTRAP_PROPERTY) == "admin"
        entries = len(trust.records(p).audit_entries())
    for name in (SERVICE_IDENTITY, "admin"):
        with build_platform(home_on(backend_url, tmp_path / f"intruder-{name}", DSV_IDENTITY=name)) as p:
            with pytest.raises(AccessDeniedError, match=f"'{name}'"):
                trust.ensure_service_identity(p, default=SERVICE_IDENTITY)
            assert [i.name for i in trust.records(p).identities()] == ["admin"]
            assert len(trust.records(p).audit_entries()) == entries
            assert not (tmp_path / f"intruder-{name}" / "identities" / f"{name}.key").exists()


def test_the_team_home_provisions_the_service_identity_as_its_admin_with_an_audit_entry(backend_url: str, tmp_path: Path) -> None:
    with build_platform(home_on(backend_url, tmp_path / "team")) as p:
        trust.current_identity(p)
    with build_platform(home_on(backend_url, tmp_path / "team", DSV_IDENTITY=SERVICE_IDENTITY)) as p:
        assert trust.ensure_service_identity(p, default=SERVICE_IDENTITY).name == SERVICE_IDENTITY
        provisioned = [e for e in trust.records(p).audit_entries() if e["target"].startswith(f"{SERVICE_IDENTITY}:") or SERVICE_IDENTITY in e["target"]]
        assert provisioned and {e["identity"] for e in provisioned} == {"admin"}, provisioned
        assert {g.role for g in trust.grants_of(p, SERVICE_IDENTITY)} == set(Role)


def test_strictness_is_recorded_once_and_never_lifted(backend_url: str, tmp_path: Path) -> None:
    with build_platform(home_on(backend_url, tmp_path / "a", DSV_STRICT="yes")) as p:
        assert trust.is_strict(p)
        assert trust.records(p).registry_property(STRICT_PROPERTY) == "1"
        with pytest.raises(Exception, match="append-only"), trust.records(p)._write() as conn:  # the property row cannot be deleted
            conn.exec_driver_sql("DELETE FROM registry_properties WHERE name = 'strict'")
    with build_platform(home_on(backend_url, tmp_path / "b", DSV_STRICT="0")) as p:
        assert trust.is_strict(p)


STRICT_VALUES = [("on", True), ("1", True), ("TRUE", True), ("yes", True), ("off", False), ("0", False), ("", False), ("no", False)]


@pytest.mark.parametrize(("value", "strict"), STRICT_VALUES)
def test_dsv_strict_values(value: str, strict: bool) -> None:
    assert load_settings({"DSV_STRICT": value}).strict is strict


@pytest.mark.parametrize("value", ["maybe", "strict", "2", "enabled"])
def test_an_unrecognised_dsv_strict_is_a_configuration_error_naming_it(value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"DSV_STRICT='{value}'") as info:
        load_settings({"DSV_STRICT": value})
    assert isinstance(info.value, EnvironmentSetupError)  # the documented configuration kind (docs/trust.md), not a usage error


@dg.asset
def who_runs(platform: PlatformResource) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"identity": trust.current_identity(platform.get()).name})


@pytest.mark.parametrize("field", ["identity", "strict", "home", "key_dir", "registry_url"])
def test_run_config_cannot_choose_the_service_identity_or_its_home(field: str, tmp_path: Path) -> None:
    resource = PlatformResource.for_settings(load_settings({"DSV_HOME": str(tmp_path / "home")}))
    value: object = False if field == "strict" else ("admin" if field == "identity" else str(tmp_path / "elsewhere"))
    with pytest.raises(dg.DagsterInvalidConfigError, match=f'unexpected config entry "{field}"'):
        dg.materialize([who_runs], resources={"platform": resource}, run_config={"resources": {"platform": {"config": {field: value}}}})
    result = dg.materialize([who_runs], resources={"platform": resource}, instance=dg.DagsterInstance.ephemeral())
    [mat] = result.asset_materializations_for_node("who_runs")
    assert mat.metadata["identity"].value == SERVICE_IDENTITY
    assert not (tmp_path / "elsewhere").exists()


def test_no_setting_reaches_the_resource_snapshot(tmp_path: Path) -> None:
    """A registry password in DSV_REGISTRY_URL is not in what the webserver is shown of the resource."""
    from dagster._core.remote_representation.external_data import RepositorySnap
    from dagster._serdes import serialize_value

    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_REGISTRY_URL": "postgresql+psycopg2://dsv:S3CRET-PASSWORD@127.0.0.1:9/dsv"})
    defs = dg.Definitions(assets=[who_runs], resources={"platform": PlatformResource.for_settings(settings)})
    snapshot = serialize_value(RepositorySnap.from_def(defs.get_repository_def()))
    assert "who_runs" in snapshot and "PlatformResource" in snapshot
    assert "S3CRET-PASSWORD" not in snapshot and str(tmp_path) not in snapshot
