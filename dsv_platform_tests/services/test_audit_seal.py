"""Issue 24 item 5: an audit log nobody can rewrite: signed entries, signed checkpoints of the head, an export that verifies offline.

On the real registries (SQLite and PostgreSQL) an insider with database write access (the append-only triggers
disabled first) edits an entry, rewrites it and re-chains every later hash, forges a ``grant.add`` by admin, signs a
forgery with its own registered key, and cuts the tail off; ``dsv audit --verify`` (``--against`` an export) names it.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.trust import TrustRecords
from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core import canonical_json
from dsv_platform.core.trust import audit_seal
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of
from dsv_platform.core.trust.trust import GENESIS_HASH, Grant, Role, audit_entry_hash
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

TABLES = ("audit_log", "audit_signatures", "audit_checkpoints")


@pytest.fixture
def home(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A home whose admin grants a role (privileged: a checkpoint), then logs three publications; the registry URL."""
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_REGISTRY_URL", backend_url)
    with build_platform(load_settings()) as p:
        trust.current_identity(p)  # admin: bootstraps the registry and signs from here on
        trust.create_identity(p, "mallory", by="admin")  # an insider with a registered key of its own
        trust.change_grant(p, Grant("mallory", Role.BUILDER), add=True)
        for i in range(3):
            trust.audit(p, "build", f"set:v1@sha256:{i:064d}", reason=f"build {i}")
    return backend_url


def sql(url: str, *statements: str, params: dict[str, object] | None = None) -> None:
    """What the insider does, straight to the database: the append-only triggers first."""
    with Registry.from_url(url) as reg, reg.engine.begin() as conn:
        for table in TABLES:
            if conn.dialect.name == "sqlite":
                conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_update"))
                conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_no_delete"))
            else:
                conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only"))
        for stmt in statements:
            conn.execute(text(stmt), params or {})


def rows(url: str) -> list[dict[str, Any]]:
    """The log as the registry reads it (``at`` in ISO text, ``detail`` parsed)."""
    with Registry.from_url(url) as reg:
        return TrustRecords.of(reg).audit_entries()


def rechain(url: str, rows_: list[dict[str, Any]]) -> None:
    """Recompute every hash from the first entry on (the formula is public), as a rewrite would."""
    prev = GENESIS_HASH
    for r in rows_:
        new = audit_entry_hash(prev, r)
        sql(url, "UPDATE audit_log SET prev_hash = :p, entry_hash = :h, identity = :i, reason = :r WHERE seq = :s",
            params={"p": prev, "h": new, "i": r["identity"], "r": r["reason"], "s": r["seq"]})  # fmt: skip
        prev = new


def verify(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["audit", "--verify", *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out + out.err


def test_every_entry_is_signed_and_the_head_checkpointed(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = verify(capsys, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verified"] and doc["signed_entries"] == doc["entries"] == len(Role) + 4
    assert doc["checkpoints"] >= 2, "the bootstrap's grants and mallory's grant are privileged"
    with Registry.from_url(home) as reg, reg.engine.connect() as conn:
        signers = dict(conn.execute(text("SELECT seq, signer FROM audit_signatures")).all())
    assert set(signers.values()) == {"admin"}


def test_an_entry_rewritten_and_rechained_without_the_key_is_untrusted(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    entries = rows(home)
    seq = next(e["seq"] for e in entries if e["target"] == "identity:mallory")  # mallory's builder grant, re-attributed and reasoned away
    entries[seq - 1].update(identity="bootstrap", reason="bootstrap of a non-strict registry")
    rechain(home, entries)
    code, out = verify(capsys)
    assert code == 13, out
    assert f"audit entry {seq} (grant.add identity:mallory by bootstrap)" in out and "does not verify" in out, out


def test_a_forged_grant_by_admin_appended_and_chained_is_untrusted(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    last = rows(home)[-1]
    seq = int(last["seq"]) + 1
    detail = Grant("mallory", Role.OPERATOR).to_document()
    fields = {"seq": seq, "at": last["at"], "identity": "admin", "action": "grant.add", "target": "identity:mallory", "reason": None, "detail": detail}
    h = audit_entry_hash(str(last["entry_hash"]), fields)
    sql(home, "INSERT INTO audit_log (seq, at, identity, action, target, reason, detail_json, prev_hash, entry_hash) "
        "VALUES (:s, :at, 'admin', 'grant.add', 'identity:mallory', NULL, :d, :p, :h)",
        params={"s": seq, "at": datetime.fromisoformat(last["at"]), "d": canonical_json.dumps(detail).decode(), "p": last["entry_hash"], "h": h})  # fmt: skip
    code, out = verify(capsys)
    assert code == 13 and f"audit entry {seq} (grant.add identity:mallory by admin) is not signed" in out, out
    with build_platform(load_settings({**os.environ, "DSV_IDENTITY": "mallory"})) as p:  # mallory signs the forgery with its own key
        sig = trust.sign_bytes(p, ev.signed_bytes(audit_seal.entry_statement(seq, h)), identity="mallory").hex()
        keyid = trust.current_identity(p).public_key.hex()
    sql(home, "INSERT INTO audit_signatures (seq, signer, keyid, signature) VALUES (:s, 'mallory', :k, :g)",
        params={"s": seq, "k": keyid_of(bytes.fromhex(keyid)), "g": sig})  # fmt: skip
    code, out = verify(capsys)
    assert code == 13 and f"audit entry {seq} names 'admin' but is signed by 'mallory'" in out, out


def test_an_edit_in_place_still_breaks_the_chain(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    sql(home, f"UPDATE audit_log SET reason = 'nothing to see' WHERE seq = {len(Role) + 3}")
    code, out = verify(capsys)
    assert code == 2 and f"audit entry {len(Role) + 3}: entry_hash" in out, out


def test_a_tail_cut_behind_a_checkpoint_is_untrusted(home: str, capsys: pytest.CaptureFixture[str]) -> None:
    with build_platform(load_settings()) as p:
        trust.change_grant(p, Grant("mallory", Role.PUBLISHER), add=True)  # privileged: checkpointed
    n = len(rows(home))
    sql(home, f"DELETE FROM audit_log WHERE seq >= {n - 1}", f"DELETE FROM audit_signatures WHERE seq >= {n - 1}")
    code, out = verify(capsys)
    assert code == 13 and f"the log ends at entry {n - 2}" in out and f"covers entry {n}: entries were cut off its tail" in out, out


def test_a_tail_cut_with_its_checkpoints_is_caught_by_an_earlier_export(home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "audit-export.json"
    assert main(["audit", "--export", str(exported)]) == 0
    assert "exported" in capsys.readouterr().out
    n = len(rows(home))
    sql(home, f"DELETE FROM audit_log WHERE seq >= {n - 2}", f"DELETE FROM audit_signatures WHERE seq >= {n - 2}",
        f"DELETE FROM audit_checkpoints WHERE seq >= {n - 2}")  # fmt: skip
    code, out = verify(capsys)
    assert code == 0, "inside the registry nothing is left to tell: the export is the anchor"
    code, out = verify(capsys, "--against", str(exported))
    assert code == 13 and f"entry {n - 2} of the export is not in the registry" in out, out


def test_an_export_verifies_offline_and_a_rewritten_export_does_not(home: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "audit-export.json"
    assert main(["audit", "--export", str(exported)]) == 0
    capsys.readouterr()
    assert main(["audit", "--verify-export", str(exported)]) == 0
    out = capsys.readouterr().out
    assert "audit export verifies" in out and "keys chain to the trust root" in out, out
    doc = json.loads(exported.read_text())
    seq = len(Role) + 2  # the first build
    doc["entries"][seq - 1]["reason"] = "approved by the board"
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    assert main(["audit", "--verify-export", str(tmp_path / "edited.json")]) == 2
    assert f"audit entry {seq}: entry_hash" in capsys.readouterr().err
    prev = GENESIS_HASH
    for e in doc["entries"]:  # re-chained: the chain holds, the signatures do not
        e["prev_hash"], e["entry_hash"] = prev, audit_entry_hash(prev, e)
        prev = e["entry_hash"]
    (tmp_path / "rechained.json").write_text(json.dumps(doc))
    assert main(["audit", "--verify-export", str(tmp_path / "rechained.json")]) == 13
    assert f"the signature of audit entry {seq} by 'admin' does not verify" in capsys.readouterr().err
