"""The per-object key store: create-once keys, crypto-erasure, the redaction-generation watermark, the deletions it applied.

Each contract test runs on the local key store (the embedded default) and on the PostgreSQL one (``DSV_KEY_STORE=postgresql+psycopg2://...``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.key_store import KEY_BYTES, KeyStore, LocalKeyStore
from dsv_platform.core.errors import ObjectErasedError, ObjectStoreError, RedactionNotReconciledError

D = hashlib.sha256(b"object").hexdigest()
SEALED = hashlib.sha256(b"ciphertext").hexdigest()

Opener = Callable[[str], KeyStore]


@pytest.fixture(params=["local", "postgres"])
def open_keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the key store named ``name`` (the same name: the same store, as another process would open it)."""
    opened: list[KeyStore] = []
    urls: dict[str, str] = {}

    def opener(name: str) -> KeyStore:
        if request.param == "local":
            store: KeyStore = LocalKeyStore(tmp_path / name)
        else:
            from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore

            server = request.getfixturevalue("postgres_server")
            url = urls.setdefault(name, server.url(server.create_database()))
            store = PostgresKeyStore(url)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


def test_key_store_creates_each_key_once(open_keys: Opener) -> None:
    keys = open_keys("keys")
    first = keys.create(D)
    assert len(first) == KEY_BYTES and keys.create(D) == first and keys.key(D) == first
    assert open_keys("keys").key(D) == first  # durable, and seen by another opener
    assert keys.key(hashlib.sha256(b"other").hexdigest()) is None
    keys.bind(D, SEALED)
    assert keys.sealed(D) == SEALED and list(keys.digests()) == [D]
    assert [(d, s) for d, s, _ in keys.bindings()] == [(D, SEALED)]


def test_key_store_destroy_is_crypto_erasure(open_keys: Opener) -> None:
    keys = open_keys("keys")
    keys.create(D)
    assert keys.destroy(D) is True
    assert keys.is_erased(D) and list(keys.digests()) == [] and open_keys("keys").is_erased(D)
    with pytest.raises(ObjectErasedError, match=D):
        keys.key(D)
    with pytest.raises(ObjectErasedError):
        keys.create(D)  # erased bytes may not come back under a new key
    assert keys.destroy(D) is False  # idempotent


def test_forget_removes_a_key_without_a_tombstone(open_keys: Opener) -> None:
    keys = open_keys("keys")
    first = keys.create(D)
    keys.bind(D, SEALED)
    assert keys.forget(D) is True and keys.key(D) is None and keys.sealed(D) is None and not keys.is_erased(D)
    assert keys.forget(D) is False
    assert keys.create(D) != first  # the digest may be stored again, under a new key


def test_key_store_generation_is_monotonic_and_checked(open_keys: Opener) -> None:
    keys = open_keys("keys")
    assert keys.generation() == 0
    keys.require_generation(0)
    keys.set_generation(2)
    assert keys.generation() == 2 and open_keys("keys").generation() == 2
    with pytest.raises(ObjectStoreError, match="lower"):
        keys.set_generation(1)
    with pytest.raises(RedactionNotReconciledError, match="older key/object store backup"):
        keys.require_generation(3)
    with pytest.raises(RedactionNotReconciledError, match="older registry backup"):
        keys.require_generation(1)


def test_key_store_salt_is_stable_and_secret(open_keys: Opener) -> None:
    a = open_keys("a")
    assert len(a.salt()) == KEY_BYTES and a.salt() == a.salt() == open_keys("a").salt()
    assert a.salt() != open_keys("b").salt()


def test_key_store_keeps_each_deletion_once(open_keys: Opener) -> None:
    keys = open_keys("keys")
    assert keys.deletions() == []
    keys.record_deletion(2, "del-2", "b" * 64)
    keys.record_deletion(1, "del-1", "a" * 64)
    keys.record_deletion(1, "del-1", "a" * 64)  # a rerun of the same request
    assert open_keys("keys").deletions() == [(1, "del-1", "a" * 64), (2, "del-2", "b" * 64)]  # durable, by generation


# ---------------------------------------------------------------- the local store's files


def test_local_destroy_removes_the_key_file(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    keys.create(D)
    key_file = tmp_path / "keys" / "keys" / D[:2] / f"{D[2:]}.key"
    assert key_file.exists()
    assert keys.destroy(D) is True and not key_file.exists()


def test_local_salt_and_deletions_are_owner_only_and_a_damaged_record_is_refused(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    keys.salt()
    keys.record_deletion(1, "del-1", "a" * 64)
    keys.record_deletion(2, "del-2", "b" * 64)
    assert (tmp_path / "keys").stat().st_mode & 0o077 == 0
    assert (tmp_path / "keys" / "deletions" / "000000000001.json").stat().st_mode & 0o077 == 0
    (tmp_path / "keys" / "deletions" / "000000000002.json").write_text("{not json")
    with pytest.raises(ObjectStoreError, match=r"000000000002\.json"):
        keys.deletions()
