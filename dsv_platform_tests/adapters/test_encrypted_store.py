"""EncryptingObjectStore: plaintext-addressed, per-object AES-GCM keys, crypto-erasure, plain fallback."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidTag

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.envelope import seal, unseal
from dsv_platform.adapters.objects.key_store import LocalKeyStore
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectVerificationError

DATA = b"account_id=acct-0001;amount=12.50\n" * 100


def make(tmp_path: Path, keys: str = "keys") -> EncryptingObjectStore:
    return EncryptingObjectStore(LocalObjectStore(tmp_path / "objects"), LocalObjectStore(tmp_path / "objects" / "encrypted"), LocalKeyStore(tmp_path / keys))


def test_encrypted_store_addresses_by_plaintext_and_stores_ciphertext(tmp_path: Path) -> None:
    store = make(tmp_path)
    digest = store.put(DATA)
    assert digest == hashlib.sha256(DATA).hexdigest()
    assert store.get(digest) == DATA and store.exists(digest) and store.size(digest) == len(DATA)
    assert not store.inner.exists(digest)  # nothing in the clear
    sealed = store.keys.sealed(digest)
    assert sealed is not None
    raw = store.sealed_store.get(sealed)
    assert b"acct-0001" not in raw and len(raw) == len(DATA) + 20 + 16  # the v2 header, one segment's tag
    assert [i.digest for i in store.iter_objects()] == [digest]
    assert store.put(DATA) == digest and store.keys.sealed(digest) == sealed  # idempotent, deterministic


def test_encrypted_store_ciphertext_is_bound_to_its_digest(tmp_path: Path) -> None:
    key = os.urandom(32)
    digest = hashlib.sha256(DATA).hexdigest()
    blob = seal(key, digest, DATA)
    assert unseal(key, digest, blob) == DATA
    with pytest.raises(InvalidTag):
        unseal(key, "0" * 64, blob)
    with pytest.raises(InvalidTag):
        unseal(os.urandom(32), digest, blob)


def test_encrypted_store_erase_makes_the_object_unreadable(tmp_path: Path) -> None:
    store = make(tmp_path)
    digest = store.put(DATA)
    sealed = store.erase(digest)
    assert sealed is not None
    with pytest.raises(ObjectErasedError):
        store.get(digest)
    assert not store.exists(digest)
    raw = store.sealed_store.get(sealed)  # the ciphertext may survive (in backups too) ...
    for _ in range(3):
        with pytest.raises(InvalidTag):  # ... and is noise without the destroyed key
            unseal(os.urandom(32), digest, raw)
    with pytest.raises(ObjectErasedError):
        store.put(DATA)


def test_encrypted_store_detects_tampered_ciphertext(tmp_path: Path) -> None:
    store = make(tmp_path)
    digest = store.put(DATA)
    path = store.sealed_store.path(store.keys.sealed(digest))  # type: ignore[arg-type]
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ObjectVerificationError):
        store.get(digest)


def test_encrypted_store_reads_plain_objects_and_stages(tmp_path: Path) -> None:
    store = make(tmp_path)
    plain = store.inner.put(b"not subject-bearing")
    assert store.get(plain) == b"not subject-bearing" and not store.is_encrypted(plain)
    with pytest.raises(ObjectNotFoundError):
        store.get("0" * 64)
    store.stage("attempt-1", "part.parquet", DATA)
    digest = store.promote("attempt-1", "part.parquet")
    assert store.is_encrypted(digest) and store.get(digest) == DATA
    assert store.abandon("attempt-1") == 1
    assert store.delete(digest) is True and not store.exists(digest)


def test_encrypted_store_concurrent_writers_agree(tmp_path: Path) -> None:
    a, b = make(tmp_path), make(tmp_path)
    assert a.put(DATA) == b.put(DATA)
    assert a.keys.sealed(hashlib.sha256(DATA).hexdigest()) == b.keys.sealed(hashlib.sha256(DATA).hexdigest())
