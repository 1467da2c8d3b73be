"""Issue 28 item 4: one settings path. Every ``DSV_*`` variable settings.py reads reaches a Dagster run unchanged.

The resource is bound to the whole Settings value (no field-by-field copy that a new setting could miss), so
the test sets each variable the module reads, to a value other than its default, and compares what an asset
sees inside a real Dagster run with what ``load_settings`` read.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform import settings as settings_module
from dsv_platform.core.errors import EnvironmentSetupError
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.settings import Settings, load_settings

SEEN: list[Settings] = []


@dg.asset
def what_the_run_sees(platform: PlatformResource) -> None:
    SEEN.append(platform.settings())


def _variables() -> set[str]:
    found = set(re.findall(r"\"(DSV_[A-Z_]+)\"", Path(settings_module.__file__).read_text(encoding="utf-8")))
    return {name for name in found if not name.endswith("_")}  # a prefix (DSV_CATALOG_<KEY>): one of its variables is set below


def test_every_dsv_variable_reaches_a_dagster_run(tmp_path: Path) -> None:
    values = {
        "DSV_HOME": str(tmp_path / "home"),
        "DSV_REGISTRY_URL": "postgresql+psycopg2://dsv@127.0.0.1:9/registry",
        "DSV_OBJECT_STORE": "s3://bucket/objects",
        "DSV_S3_ENDPOINT_URL": "http://127.0.0.1:9",
        "DSV_S3_REGION": "eu-central-1",
        "DSV_ICEBERG_CATALOG_URL": "postgresql+psycopg2://dsv@127.0.0.1:9/catalog",
        "DSV_ICEBERG_WAREHOUSE": "s3://bucket/warehouse",
        "DSV_KEY_STORE": str(tmp_path / "vault"),
        "DSV_DROP_FOLDER": str(tmp_path / "drop"),
        "DSV_ACTOR": "someone",
        "DSV_IDENTITY": "service-a",
        "DSV_KEY_DIR": str(tmp_path / "keys"),
        "DSV_STRICT": "1",
        "DSV_CONFIG_DIR": str(tmp_path / "config"),
        "DSV_ENV_CACHE": str(tmp_path / "envs"),
        "DSV_BUILD_JOBS": "3",
        "DSV_SUBJECT_KEY_FILE": str(tmp_path / "privacy" / "subject-key"),
        "DSV_TRUST_ROOT": "ed25519:" + "ab" * 32,
        "DSV_BUILD_ENGINE": "arrow",
        "DSV_BUILD_MEMORY": "512MiB",
        "DSV_CATALOG_NAME": "lake",
        "DSV_CATALOG_URI": "postgresql+psycopg2://dsv@127.0.0.1:9/lake",
        "DSV_AUDIT_LOCK_DAYS": "30",
        "DSV_DAGSTER_URL": "http://ops:secret@dagster.internal:3000",
    }
    assert _variables() <= set(values), f"a DSV_* variable this test does not set: {sorted(_variables() - set(values))}"
    loaded = load_settings(values)
    defaults = load_settings({"DSV_HOME": values["DSV_HOME"]})
    not_dsv = ("home", "dagster_home", "openlineage")  # the same home; DAGSTER_HOME and OPENLINEAGE_* are not DSV_* variables
    url_keys = replace_key_store(values)  # DSV_KEY_STORE names a folder (key_store) or a database (key_store_url), DSV_DROP_FOLDER a folder
    # (drop_folder) or an S3 prefix (drop_url): both reach the run
    unchanged = [
        f.name
        for f in dataclasses.fields(Settings)
        if f.name not in not_dsv and getattr(loaded, f.name) == getattr(defaults, f.name) and getattr(url_keys, f.name) == getattr(defaults, f.name)
    ]
    assert unchanged == [], f"settings that no variable changed: {unchanged}"
    SEEN.clear()
    result = dg.materialize([what_the_run_sees], resources={"platform": PlatformResource.for_settings(loaded)}, instance=dg.DagsterInstance.ephemeral())
    assert result.success
    [seen] = SEEN
    assert seen == loaded
    assert (seen.build_jobs, seen.env_cache) == (3, (tmp_path / "envs").resolve())
    assert (seen.build_engine, seen.build_memory) == ("arrow", 512 << 20)
    SEEN.clear()
    assert dg.materialize([what_the_run_sees], resources={"platform": PlatformResource.for_settings(url_keys)}, instance=dg.DagsterInstance.ephemeral()).success
    assert [url_keys] == SEEN and (url_keys.key_store_url, url_keys.drop_url) == (KEY_STORE_URL, DROP_URL)


KEY_STORE_URL = "postgresql+psycopg2://dsv:pw@127.0.0.1:9/keys"
DROP_URL = "s3://bucket/drop"


def replace_key_store(values: dict[str, str]) -> Settings:
    return load_settings({**values, "DSV_KEY_STORE": KEY_STORE_URL, "DSV_DROP_FOLDER": DROP_URL})


def test_the_readme_settings_table_lists_every_variable() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Settings", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| *(DSV_[A-Z_]+)|, (DSV_[A-Z_]+)", table, flags=re.M))
    names = {name for pair in listed for name in pair if name}
    assert _variables() - names == set(), "add them to README.md's settings table"


def test_build_engine_and_memory_are_parsed_strictly() -> None:
    assert (load_settings({}).build_engine, load_settings({}).build_memory) == ("duckdb", 1 << 30)
    assert load_settings({"DSV_BUILD_MEMORY": "2GiB"}).build_memory == 2 << 30
    assert load_settings({"DSV_BUILD_MEMORY": "1500MB"}).build_memory == 1_500_000_000
    for name, bad in [("DSV_BUILD_ENGINE", "spark"), ("DSV_BUILD_MEMORY", "lots"), ("DSV_BUILD_MEMORY", "1MiB"), ("DSV_BUILD_MEMORY", "2TB")]:
        with pytest.raises(EnvironmentSetupError, match=name):
            load_settings({name: bad})
