"""Issue 24 item 10: a key is created where its holder runs; the operator registers only its public key.

On SQLite and PostgreSQL: a strict home's operator ``boss`` and the holder ``alice`` use one registry with their own key
folders (``DSV_KEY_DIR``). Alice runs ``dsv identity keygen alice`` (her folder, her public key on stdout); boss runs
``dsv identity create alice --public-key FILE`` and grants her ``auditor``. Boss's folder never holds alice's private
key, and alice acts from her own: she signs the checkpoint of an audit export, which ``dsv audit --verify`` accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


def ok(result: Result) -> str:
    assert result.code == 0, result
    return result.out


def test_the_holder_generates_the_key_and_the_operator_registers_its_public_half(
    backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = {"DSV_HOME": str(tmp_path / "home"), "DSV_REGISTRY_URL": backend_url}
    operator_keys, alice_keys = tmp_path / "boss-keys", tmp_path / "alice-keys"
    boss = DsvCli(capsys, monkeypatch, {**shared, "DSV_KEY_DIR": str(operator_keys)})
    alice = DsvCli(capsys, monkeypatch, {**shared, "DSV_KEY_DIR": str(alice_keys)})
    ok(boss("init", "--strict", "--admin", "boss"))

    generated = alice("identity", "keygen", "alice")
    public = ok(generated).strip()
    assert public.startswith("ed25519:") and len(public) == len("ed25519:") + 64, generated
    assert "fingerprint ed25519:sha256:" in generated.err and str(alice_keys / "alice.key") in generated.err
    assert (alice_keys / "alice.key").stat().st_mode & 0o777 == 0o600
    (pub := tmp_path / "alice.pub").write_text(public + "\n")

    created = json.loads(ok(boss("identity", "create", "alice", "--public-key", str(pub), "--json", identity="boss")))
    assert created["created"] is True and created["private_key"] is None
    assert created["fingerprint"] in generated.err
    assert sorted(p.name for p in operator_keys.iterdir()) == ["boss.key"], "the operator's folder holds no private key of alice"
    ok(boss("grants", "add", "alice", "auditor", "--reason", "reviews the log", identity="boss"))

    assert "identity alice:" in ok(alice("identity", "show", identity="alice"))
    export = tmp_path / "audit.json"
    ok(alice("audit", "--export", str(export), identity="alice"))  # a fresh checkpoint, signed with alice's own key
    checkpoints = json.loads(export.read_text())["checkpoints"]
    assert checkpoints[-1]["signer"] == "alice"
    ok(alice("audit", "--verify", identity="alice"))
    refused = boss("identity", "show", identity="alice")  # the operator cannot act as alice: it never held her key
    assert refused.code == 7 and "no private key" in refused.err, refused

    again = boss("identity", "create", "alice", "--public-key", "ed25519:" + "ab" * 32, identity="boss")
    assert again.code != 0 and "already exists with another public key" in again.err, again
    bad = boss("identity", "create", "carol", "--public-key", "not-a-key", identity="boss")
    assert bad.code != 0 and "--public-key" in bad.err and "not an Ed25519 public key" in bad.err, bad
