"""The PostgreSQL key store (issue 26 item 4): ``DSV_KEY_STORE=postgresql+psycopg2://...`` keeps the keys apart from the data.

Before: the keys could only be files (``$DSV_HOME/keys``), on the same shared volume as the home. Now bootstrap picks a
PostgreSQL database of their own when the variable is a URL; an erasure deletes the key's row; the URL's password is
masked wherever a Settings or an error prints it.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from dsv_platform.adapters.objects.key_store import LocalKeyStore
from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore
from dsv_platform.bootstrap import build_encrypted_store, build_platform, key_store_of
from dsv_platform.core.errors import EnvironmentSetupError, ObjectErasedError, ServiceUnreachableError
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.postgres_server import PostgresServer

SECRET = "s3cr3t-key-store-pw"
D = hashlib.sha256(b"object").hexdigest()


def _with_password(url: str, password: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{password}@{host}"


def test_an_erased_key_is_gone_from_the_table(postgres_url: str) -> None:
    keys = PostgresKeyStore(postgres_url)
    key = keys.create(D)
    other = keys.create(hashlib.sha256(b"other").hexdigest())
    keys.bind(D, hashlib.sha256(b"ciphertext").hexdigest())
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        before = conn.execute(text("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'dsv_object_keys'")).scalar_one()
    assert keys.destroy(D) is True
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM dsv_object_keys WHERE digest = :d"), {"d": D}).scalar_one() == 0
        assert [bytes(k) for k in conn.execute(text("SELECT key FROM dsv_object_keys")).scalars()] == [other]
        tables = conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars().all()
        for table in tables:  # the key's bytes in no row of any table of the key store's database
            for (row,) in conn.execute(text(f'SELECT CAST(t AS text) FROM "{table}" t')):
                assert key.hex() not in row, table
        deadline = time.monotonic() + 10  # the statistics are published when the VACUUM's backend reports them
        while conn.execute(text("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'dsv_object_keys'")).scalar_one() == before:
            assert time.monotonic() < deadline, "destroy vacuums the keys table"
            time.sleep(0.2)
            conn.rollback()
            conn.execute(text("SELECT pg_stat_clear_snapshot()"))
    engine.dispose()
    with pytest.raises(ObjectErasedError):
        PostgresKeyStore(postgres_url).key(D)
    keys.close()


def test_dsv_key_store_names_a_folder_or_a_postgresql_database(postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = _with_password(postgres_server.url(postgres_server.create_database()), SECRET)
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_KEY_STORE": url})
    assert settings.key_store_url == url and SECRET not in repr(settings) and "***" in repr(settings)
    keys = key_store_of(settings)
    assert isinstance(keys, PostgresKeyStore) and SECRET not in repr(keys)
    keys.close()
    folder = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_KEY_STORE": str(tmp_path / "vault")})
    assert folder.key_store_url is None and isinstance(key_store_of(folder), LocalKeyStore)
    assert load_settings({"DSV_HOME": str(tmp_path / "home")}).key_store_url is None  # the embedded default: files


def test_a_key_store_url_of_another_kind_is_refused_with_its_password_masked() -> None:
    with pytest.raises(EnvironmentSetupError, match="DSV_KEY_STORE") as refused:
        load_settings({"DSV_KEY_STORE": f"mysql://dsv:{SECRET}@db/keys"})
    assert SECRET not in str(refused.value) and "***" in str(refused.value)


def test_an_unreachable_key_store_is_one_error_with_its_password_masked(tmp_path: Path) -> None:
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_KEY_STORE": f"postgresql+psycopg2://dsv:{SECRET}@127.0.0.1:9/keys"})
    with pytest.raises(ServiceUnreachableError, match="key store") as failed:
        key_store_of(settings)
    assert SECRET not in str(failed.value) and "***" in str(failed.value)


def test_a_platform_on_the_postgresql_key_store_keeps_no_key_under_the_home(postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = _with_password(postgres_server.url(postgres_server.create_database()), SECRET)
    home = tmp_path / "home"
    with build_platform(load_settings({"DSV_HOME": str(home), "DSV_KEY_STORE": url})) as platform:
        assert isinstance(platform.store.keys, PostgresKeyStore)
        assert SECRET not in platform.describe()["key_store"]
        digest = platform.store.put(b"subject acct_00042")
        assert platform.store.is_encrypted(digest) and platform.store.get(digest) == b"subject acct_00042"
    assert not (home / "keys").exists(), "no key file under the home"
    other = build_encrypted_store(load_settings({"DSV_HOME": str(home), "DSV_KEY_STORE": url}))  # another process
    assert other.get(digest) == b"subject acct_00042"
    other.erase(digest)
    with pytest.raises(ObjectErasedError):
        other.get(digest)
    other.keys.close()
