"""`dsv keys copy --to URL`: a home's key folder copied to a fresh PostgreSQL key store (deploy/README.md, "Secrets").

Everything the key store holds arrives byte for byte (keys, the erased key's tombstone, the bindings, the deletion
record, the generation, the salt), objects read through the new store, the erased one stays erased, the source is
untouched, a rerun writes nothing, a target holding other keys is refused and left as it was, and only an operator
may copy (audited).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.key_copy import read_set
from dsv_platform.adapters.objects.key_store import LocalKeyStore
from dsv_platform.adapters.objects.key_store_pg import PostgresKeyStore
from dsv_platform.bootstrap import build_encrypted_store, build_platform
from dsv_platform.core.errors import ObjectErasedError
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.fixtures.postgres_server import PostgresServer

SECRET = "k3y-st0re-pw"
LIVE, GONE = b"subject acct_00042: kept", b"subject acct_00043: erased"


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_key_folder_copied_to_postgresql_reads_the_same(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    home = tmp_path / "home"
    monkeypatch.delenv("DSV_KEY_STORE", raising=False)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(home)})
    assert dsv("init", "--strict", "--admin", "boss").code == 0
    assert dsv("identity", "create", "bob", identity="boss").code == 0
    assert dsv("grants", "add", "bob", "privacy_officer", "--reason", "set-up", identity="boss").code == 0
    with build_platform(load_settings({"DSV_HOME": str(home)})) as p:
        live, gone = p.store.put(LIVE), p.store.put(GONE)
        p.store.erase(gone)
        keys = p.store.keys
        keys.record_deletion(1, "del-1", "a" * 64)
        keys.set_generation(1)
        keys.salt()
    source = LocalKeyStore(home / "keys")
    before, files = read_set(source), _tree(home / "keys")
    assert before.keys.keys() == {live} and before.erased == {gone} and len(before.bindings) == 2 and before.generation == 1

    url = postgres_server.url(postgres_server.create_database())
    refused = dsv("keys", "copy", "--to", url, identity="bob")
    assert refused.code == 7 and "'bob'" in refused.err and "'operator'" in refused.err, refused
    done = dsv("keys", "copy", "--to", url, "--json", identity="boss")
    assert done.code == 0, done
    doc = json.loads(done.out)
    assert (doc["keys"], doc["erased"], doc["bindings"], doc["deletions"], doc["generation"]) == (1, 1, 2, 1, 1)
    assert doc["digest"] == before.digest() and doc["written"] == 5  # salt, two entries, the deletion, the generation

    target = PostgresKeyStore(url)
    assert read_set(target) == before and target.salt() == before.salt  # every key's bytes, erased set, bindings, deletions
    assert read_set(source) == before and _tree(home / "keys") == files  # the source was only read
    moved = build_encrypted_store(load_settings({"DSV_HOME": str(home), "DSV_KEY_STORE": url}))
    assert moved.get(live) == LIVE
    with pytest.raises(ObjectErasedError):
        moved.get(gone)
    with pytest.raises(ObjectErasedError):  # the erased digest is never given a key again
        moved.put(GONE)

    rerun = dsv("keys", "copy", "--to", url, identity="boss")
    assert rerun.code == 0 and "0 entries written now" in rerun.out and before.digest() in rerun.out, rerun
    assert read_set(target) == before
    with build_platform(load_settings({"DSV_HOME": str(home)})) as p:
        actions = [e["action"] for e in trust.records(p).audit_entries() if e["action"].startswith("keys.copy")]
        audited = [e for e in trust.records(p).audit_entries() if e["action"] == "keys.copy"]
    assert actions == ["keys.copy.start", "keys.copy"] * 2
    assert audited[0]["identity"] == "boss" and audited[0]["detail"]["digest"] == before.digest()
    target.close()


def test_a_target_holding_other_keys_is_refused_and_left_unchanged(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    home = tmp_path / "home"
    monkeypatch.delenv("DSV_KEY_STORE", raising=False)
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(home)})
    with build_platform(load_settings({"DSV_HOME": str(home)})) as p:
        p.store.put(LIVE)
    scheme, rest = postgres_server.url(postgres_server.create_database()).split("://", 1)
    url = f"{scheme}://{rest.replace('@', ':' + SECRET + '@', 1)}"  # a password on the command line: never printed
    other = PostgresKeyStore(url)
    other.create("f" * 64)
    held = read_set(other)
    refused = dsv("keys", "copy", "--to", url)
    assert refused.code == 2 and "already holds entries" in refused.err and "keys (1, first " + "f" * 64 in refused.err, refused
    assert refused.err.count("\n") == 1 and SECRET not in refused.err and "***" in refused.err and read_set(other) == held
    same = dsv("keys", "copy", "--to", str(home / "keys"))
    assert same.code == 2 and "configured key store itself" in same.err, same
    other.close()
