"""The per-object key store: create-once keys, crypto-erasure, the redaction-generation watermark, the deletions it applied."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.key_store import KEY_BYTES, LocalKeyStore
from dsv_platform.core.errors import ObjectErasedError, ObjectStoreError, RedactionNotReconciledError

D = hashlib.sha256(b"object").hexdigest()
SEALED = hashlib.sha256(b"ciphertext").hexdigest()


def test_key_store_creates_each_key_once(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    first = keys.create(D)
    assert len(first) == KEY_BYTES and keys.create(D) == first and keys.key(D) == first
    assert LocalKeyStore(tmp_path / "keys").key(D) == first  # durable
    assert keys.key(hashlib.sha256(b"other").hexdigest()) is None
    keys.bind(D, SEALED)
    assert keys.sealed(D) == SEALED and list(keys.digests()) == [D]


def test_key_store_destroy_is_crypto_erasure(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    keys.create(D)
    key_file = tmp_path / "keys" / "keys" / D[:2] / f"{D[2:]}.key"
    assert key_file.exists()
    assert keys.destroy(D) is True
    assert not key_file.exists() and keys.is_erased(D) and list(keys.digests()) == []
    with pytest.raises(ObjectErasedError, match=D):
        keys.key(D)
    with pytest.raises(ObjectErasedError):
        keys.create(D)  # erased bytes may not come back under a new key
    assert keys.destroy(D) is False  # idempotent


def test_key_store_generation_is_monotonic_and_checked(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    assert keys.generation() == 0
    keys.require_generation(0)
    keys.set_generation(2)
    assert keys.generation() == 2
    with pytest.raises(ObjectStoreError, match="lower"):
        keys.set_generation(1)
    with pytest.raises(RedactionNotReconciledError, match="older key/object store backup"):
        keys.require_generation(3)
    with pytest.raises(RedactionNotReconciledError, match="older registry backup"):
        keys.require_generation(1)


def test_key_store_salt_is_stable_and_secret(tmp_path: Path) -> None:
    a = LocalKeyStore(tmp_path / "a")
    assert a.salt() == a.salt() == LocalKeyStore(tmp_path / "a").salt()
    assert a.salt() != LocalKeyStore(tmp_path / "b").salt()
    assert (tmp_path / "a").stat().st_mode & 0o077 == 0


def test_key_store_keeps_each_deletion_once_and_refuses_a_damaged_record(tmp_path: Path) -> None:
    keys = LocalKeyStore(tmp_path / "keys")
    assert keys.deletions() == []
    keys.record_deletion(2, "del-2", "b" * 64)
    keys.record_deletion(1, "del-1", "a" * 64)
    keys.record_deletion(1, "del-1", "a" * 64)  # a rerun of the same request
    assert LocalKeyStore(tmp_path / "keys").deletions() == [(1, "del-1", "a" * 64), (2, "del-2", "b" * 64)]  # durable, by generation
    assert (tmp_path / "keys" / "deletions" / "000000000001.json").stat().st_mode & 0o077 == 0
    (tmp_path / "keys" / "deletions" / "000000000002.json").write_text("{not json")
    with pytest.raises(ObjectStoreError, match=r"000000000002\.json"):
        keys.deletions()
