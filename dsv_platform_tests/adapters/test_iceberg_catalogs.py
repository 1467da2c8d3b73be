"""Issue 26 item 12: the catalog is loaded through pyiceberg's ``load_catalog`` configuration, not a hard-coded SqlCatalog.

Three ways to name it, each honoured end to end (land, canonical load, read back through a catalog pyiceberg opens
by itself): platform.yaml's ``catalog:`` (SQLite elsewhere than the home), ``DSV_CATALOG_*`` (PostgreSQL) and
pyiceberg's own ``.pyiceberg.yaml`` chosen by ``DSV_CATALOG_NAME`` (PostgreSQL). A credential is refused in
platform.yaml, and one given as ``DSV_CATALOG_*`` reaches neither the Dagster repository snapshot nor an error line.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value
from pyiceberg.catalog import load_catalog
from pyiceberg.serializers import FromInputFile

from dsv_platform.adapters.iceberg.iceberg_catalog import build_catalog, resolved_properties
from dsv_platform.bootstrap import build_platform, build_tables
from dsv_platform.core.config.platform_options import PlatformOptions
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import EnvironmentSetupError
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform.settings import DEFAULT_CONFIG_DIR, load_settings
from dsv_platform_tests.scenarios.support import World


def _config_with(tmp_path: Path, catalog_yaml: str) -> Path:
    folder = tmp_path / "config"
    shutil.copytree(DEFAULT_CONFIG_DIR, folder)
    with (folder / "platform.yaml").open("a", encoding="utf-8") as f:
        f.write(catalog_yaml)
    return folder


def _landed_and_read(settings, name: str, catalog_props: dict[str, str], *, build: bool = False) -> None:
    world = World.create(settings=settings, rows_per_day=40 if build else 5, days=2)
    rows = world.tables.read(TRANSACTIONS).num_rows
    assert rows > 0
    assert not (settings.home / "iceberg_catalog.db").exists()  # the embedded default was not used
    other = load_catalog(name, **catalog_props)  # pyiceberg on its own, as another engine would (a SQL catalog's rows are per catalog name)
    assert ("canonical", "transactions") in other.list_tables("canonical")
    assert other.load_table("canonical.transactions").scan().to_arrow().num_rows >= rows
    if build:  # a realization pins the configured catalog's snapshots and re-hashes to its content hash
        built = world.build("v6")
        assert set(other.load_table("canonical.transactions").refs()) > {"main"} and world.reverify(built) == built.content_hash
    world.platform.close()


def test_platform_yaml_catalog_sqlite_elsewhere(tmp_path):
    uri, warehouse = f"sqlite:///{tmp_path / 'shared' / 'catalog.db'}", (tmp_path / "shared" / "warehouse")
    (tmp_path / "shared").mkdir()
    config = _config_with(tmp_path, f"catalog: {{name: lake, type: sql, uri: '{uri}', warehouse: '{warehouse.as_uri()}'}}\n")
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    assert build_platform(settings).config.options.catalog_name == "lake"
    _landed_and_read(settings, "lake", {"type": "sql", "uri": uri, "warehouse": warehouse.as_uri()}, build=True)


@pytest.mark.postgres
def test_dsv_catalog_variables_postgresql(tmp_path, postgres_url):
    env = {"DSV_HOME": str(tmp_path / "home"), "DSV_CATALOG_URI": postgres_url, "DSV_CATALOG_WAREHOUSE": str(tmp_path / "wh")}
    settings = load_settings(env)
    assert dict(settings.catalog) == {"uri": postgres_url, "warehouse": str(tmp_path / "wh")}
    _landed_and_read(settings, "dsv", {"uri": postgres_url, "warehouse": (tmp_path / "wh").as_uri()})


@pytest.mark.postgres
def test_pyiceberg_yaml_named_by_dsv_catalog_name(tmp_path, postgres_url, monkeypatch):
    (tmp_path / "pyhome").mkdir()
    (tmp_path / "pyhome" / ".pyiceberg.yaml").write_text(
        f"catalog:\n  prod:\n    uri: {postgres_url}\n    warehouse: {(tmp_path / 'wh').as_uri()}\n", encoding="utf-8"
    )
    (tmp_path / "wh").mkdir()
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path / "pyhome"))
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CATALOG_NAME": "prod"})
    name, props = resolved_properties(settings.catalog_name, {}, sql_url=settings.iceberg_catalog_url, warehouse=settings.iceberg_warehouse)
    assert (name, props["uri"], props["warehouse"]) == ("prod", postgres_url, (tmp_path / "wh").as_uri())
    _landed_and_read(settings, "prod", {"uri": postgres_url, "warehouse": (tmp_path / "wh").as_uri()})


def test_the_embedded_default_is_the_sqlite_catalog_under_the_home(tmp_path):
    settings = load_settings({"DSV_HOME": str(tmp_path / "home")})
    name, props = resolved_properties(None, {}, sql_url=settings.iceberg_catalog_url, warehouse=settings.iceberg_warehouse)
    assert (name, props["type"], props["uri"]) == ("dsv", "sql", f"sqlite:///{tmp_path / 'home' / 'iceberg_catalog.db'}")
    assert props["warehouse"] == (tmp_path / "home" / "warehouse").as_uri()
    assert type(build_tables(settings).catalog).__name__ == "SqlCatalog"


def test_catalog_variables_are_spelled_as_pyiceberg_spells_them():
    env = {"DSV_CATALOG_TYPE": "rest", "DSV_CATALOG_S3__ACCESS_KEY_ID": "AK", "DSV_CATALOG_REST__SIGNING_REGION": "eu", "DSV_CATALOG_NAME": "x"}
    settings = load_settings(env)
    assert dict(settings.catalog) == {"type": "rest", "s3.access-key-id": "AK", "rest.signing-region": "eu"}
    assert settings.catalog_name == "x" and settings.with_home(Path("/tmp/elsewhere")).catalog == ()
    with pytest.raises(EnvironmentSetupError, match="DSV_CATALOG__"):
        load_settings({"DSV_CATALOG__": "x"})


@pytest.mark.parametrize(
    "line", ["catalog: {token: abc}", "catalog: {uri: 'postgresql://dsv:hunter2@db/cat'}", "catalog: {s3.secret-access-key: x}", "catalog: [sql]"]
)
def test_a_credential_in_platform_yaml_is_refused(tmp_path, line):
    config = _config_with(tmp_path, line + "\n")
    with pytest.raises(ConfigError, match=r"platform.yaml.*catalog"):
        build_platform(load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)}))


def test_catalog_credentials_reach_no_snapshot_and_no_error_line(tmp_path):
    secret = "hunter2-catalog-secret"
    env = {"DSV_HOME": str(tmp_path / "home"), "DSV_CATALOG_URI": f"postgresql+psycopg2://dsv:{secret}@127.0.0.1:9/cat", "DSV_CATALOG_TOKEN": secret}
    settings = load_settings(env)
    repo = build_defs(settings).get_repository_def()
    assert secret not in serialize_value(RepositorySnap.from_def(repo))
    with pytest.raises(EnvironmentSetupError) as info:
        build_tables(settings, PlatformOptions())
    assert secret not in str(info.value) and "\n" not in str(info.value)


def _open_at_once(url: str, warehouse: str, count: int) -> list[Exception]:
    start, errors = threading.Barrier(count), list[Exception]()

    def open_catalog() -> None:
        start.wait()
        try:
            build_catalog(url, warehouse).list_namespaces()
        except Exception as exc:  # handed to the test
            errors.append(exc)

    threads = [threading.Thread(target=open_catalog) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


@pytest.mark.postgres
def test_processes_opening_a_fresh_postgresql_catalog_at_once_all_open_it(tmp_path, postgres_server):
    """Celery workers (or a webserver and a daemon) starting together on a new catalog database: each creates the catalog's
    tables if absent, and the ones that lose PostgreSQL's race to create them (a duplicate ``pg_type`` row, or ``already
    exists``) open the catalog the winner made instead of failing the run."""
    for attempt in range(3):  # fresh databases: the race is only at creation
        url = postgres_server.url(postgres_server.create_database())
        assert _open_at_once(url, (tmp_path / f"warehouse{attempt}").as_uri(), 8) == []


def test_a_sql_catalog_parses_each_metadata_file_once_and_sees_another_writers_commit_at_once(tmp_path):
    """The SQL catalog keeps parsed metadata by location (sql_catalog.py): two loads share it, a commit by another catalog
    (another process) is seen at the next load, and what is kept is what pyiceberg parses from the file."""
    world = World.create(tmp_path / "home", rows_per_day=5, days=2)
    catalog = world.tables.catalog
    assert type(catalog).__module__ == "dsv_platform.adapters.iceberg.sql_catalog"
    first, again = catalog.load_table("canonical.transactions"), catalog.load_table("canonical.transactions")
    assert first is not again and first.metadata is again.metadata  # two tables over one parse
    assert first.metadata == FromInputFile.table_metadata(first.io.new_input(first.metadata_location))
    props = resolved_properties(None, {}, sql_url=world.settings.iceberg_catalog_url, warehouse=world.settings.iceberg_warehouse)[1]
    other = load_catalog("dsv", **props)  # pyiceberg's own SqlCatalog, as another process would open it
    tbl = other.load_table("canonical.transactions")
    tbl.manage_snapshots().create_tag(tbl.current_snapshot().snapshot_id, "seen-elsewhere").commit()
    now = catalog.load_table("canonical.transactions")
    assert now.metadata_location != first.metadata_location and "seen-elsewhere" in now.refs()
    assert "seen-elsewhere" not in first.refs()  # a table already loaded is not changed under its holder
    world.platform.close()
