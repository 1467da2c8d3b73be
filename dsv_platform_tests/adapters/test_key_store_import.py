"""Importing entries copied from another key store (`dsv keys copy`), on the folder and on PostgreSQL; the copy itself.

``import_entry`` writes what it is given or nothing: identical entries are kept (a rerun), a different key or binding,
or a key for an erased digest, is refused and the entry left as it was. ``copy_keys`` refuses a target holding what the
source does not, completes a partial copy, and its check names every difference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.key_copy import KeySet, copy_keys, differences, read_set
from dsv_platform.adapters.objects.key_store import KEY_BYTES, KeyStore, LocalKeyStore
from dsv_platform.core.errors import ObjectConflictError, ObjectErasedError, ObjectStoreError

D, E, F = (hashlib.sha256(x).hexdigest() for x in (b"live", b"erased", b"other"))
SEALED = hashlib.sha256(b"ciphertext").hexdigest()
KEY, OTHER_KEY = b"k" * KEY_BYTES, b"o" * KEY_BYTES

Opener = Callable[[str], KeyStore]


@pytest.fixture(params=["local", "postgres"])
def open_keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    opened: list[KeyStore] = []

    def opener(name: str) -> KeyStore:
        if request.param == "local":
            store: KeyStore = LocalKeyStore(tmp_path / name)
        else:
            from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore

            server = request.getfixturevalue("postgres_server")
            store = PostgresKeyStore(server.url(server.create_database()))
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


def test_import_entry_writes_once_and_refuses_what_differs(open_keys: Opener) -> None:
    keys = open_keys("target")
    assert keys.import_entry(D, key=KEY, sealed=SEALED) is True
    assert keys.import_entry(D, key=KEY, sealed=SEALED) is False  # a rerun: nothing written
    assert keys.key(D) == KEY and keys.sealed(D) == SEALED and list(keys.digests()) == [D]
    with pytest.raises(ObjectConflictError, match=D):
        keys.import_entry(D, key=OTHER_KEY)
    with pytest.raises(ObjectConflictError, match="bound to ciphertext"):
        keys.import_entry(D, sealed=hashlib.sha256(b"elsewhere").hexdigest())
    with pytest.raises(ObjectConflictError, match="erased in the source"):
        keys.import_entry(D, erased=True)
    assert keys.key(D) == KEY and not keys.is_erased(D) and keys.sealed(D) == SEALED  # each refusal left the entry as it was
    assert keys.import_entry(E, sealed=SEALED, erased=True) is True
    assert keys.erased() == [E] and keys.sealed(E) == SEALED
    with pytest.raises(ObjectErasedError):
        keys.key(E)
    with pytest.raises(ObjectErasedError):  # never resurrected
        keys.import_entry(E, key=KEY)
    with pytest.raises(ObjectErasedError):
        keys.key(E)
    for bad in (b"short", bytes(KEY_BYTES)):
        with pytest.raises(ObjectStoreError, match="refusing to import a key"):
            keys.import_entry(F, key=bad)
    assert keys.key(F) is None


def test_import_salt_takes_a_salt_nothing_depends_on_and_refuses_another(open_keys: Opener) -> None:
    keys = open_keys("target")
    salt = b"s" * KEY_BYTES
    assert keys.import_salt(salt) is True and keys.salt() == keys.stored_salt() == salt
    assert keys.import_salt(salt) is False
    if isinstance(keys, LocalKeyStore):  # a salt file exists only once read (used): never replaced
        with pytest.raises(ObjectConflictError, match="different salt"):
            keys.import_salt(b"t" * KEY_BYTES)
    # (the database store makes its salt when first opened: replaced only while it holds nothing else, as here)
    used = open_keys("used")
    used.create(D)
    used.salt()
    with pytest.raises(ObjectConflictError, match="different salt"):
        used.import_salt(salt)
    assert used.salt() != salt


def _source(keys: KeyStore) -> None:
    keys.create(D)
    keys.bind(D, SEALED)
    keys.create(E)
    keys.bind(E, hashlib.sha256(b"sealed-e").hexdigest())
    keys.destroy(E)
    keys.salt()
    keys.record_deletion(1, "del-1", "a" * 64)
    keys.set_generation(1)


def test_copy_keys_copies_everything_and_a_rerun_writes_nothing(open_keys: Opener) -> None:
    source, target = open_keys("source"), open_keys("target")
    _source(source)
    before = read_set(source)
    report = copy_keys(source, target, source_name="src", target_name="dst")
    assert read_set(target) == read_set(source) == before  # the source is only read
    assert report.counts == {"keys": 1, "erased": 1, "bindings": 2, "deletions": 1} and report.digest == before.digest()
    assert target.salt() == source.salt() and target.generation() == 1 and target.erased() == [E]
    assert copy_keys(source, target, source_name="src", target_name="dst").written == 0


def test_copy_keys_keeps_each_entrys_creation_time(open_keys: Opener) -> None:
    """The integrity scan reports an unbound key past its safety window: a copy must not restart the window."""
    then = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    source, target = open_keys("source"), open_keys("target")
    assert source.import_entry(D, key=KEY, made=then) and source.import_entry(F, key=OTHER_KEY, sealed=SEALED, made=then)
    assert [when for _, _, when in source.bindings()] == [then, then]
    copy_keys(source, target, source_name="src", target_name="dst")
    assert target.bindings() == source.bindings() == sorted([(D, None, then), (F, SEALED, then)])


def test_copy_keys_completes_an_interrupted_copy(open_keys: Opener) -> None:
    source, target = open_keys("source"), open_keys("target")
    _source(source)
    target.import_salt(source.salt())
    target.import_entry(D, key=source.key(D))  # a copy killed after one key, before its binding
    report = copy_keys(source, target, source_name="src", target_name="dst")
    assert read_set(target) == read_set(source) and report.written == 4  # D's binding, E's entry (erasure, binding), the deletion, the generation


@pytest.mark.parametrize("held", ["key", "erased", "generation", "salt", "deletion"])
def test_copy_keys_refuses_a_target_holding_what_the_source_does_not(open_keys: Opener, held: str) -> None:
    source, target = open_keys("source"), open_keys("target")
    _source(source)
    if held == "key":
        target.create(F)
    elif held == "erased":
        target.destroy(D)  # live in the source: the copy must not hand it back its key
    elif held == "generation":
        target.set_generation(2)
    elif held == "salt":  # a subset of the source's entries under a salt of its own (it may have hashed subjects)
        target.import_salt(b"t" * KEY_BYTES)
        target.import_entry(D, key=source.key(D))
    else:
        target.record_deletion(1, "del-other", "b" * 64)
    kept = read_set(target)
    with pytest.raises(ObjectConflictError, match="already holds entries") as refused:
        copy_keys(source, target, source_name="src", target_name="dst")
    assert held.replace("deletion", "deletions").replace("key", "keys") in str(refused.value)
    assert read_set(target) == kept


def test_differences_name_each_field() -> None:
    a = KeySet({D: KEY}, frozenset({E}), {D: SEALED}, ((1, "r", "h"),), 1, b"s" * KEY_BYTES)
    b = KeySet({D: OTHER_KEY}, frozenset(), {}, (), 0, b"t" * KEY_BYTES)
    found = " ".join(differences(a, b, subset=False))
    for name in ("keys (1, first", "erased (1, first", "bindings", "deletions", "generation (source 1, target 0)", "salt"):
        assert name in found
    assert differences(a, a, subset=False) == [] and a.digest() != b.digest()
