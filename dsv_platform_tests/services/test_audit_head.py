"""Issue 24 item 5: each publication's signed statement carries the audit head; a log cut or rewritten behind it is UNTRUSTED.

On SQLite and PostgreSQL: admin publishes a signed realization; its statement names the newest audit entry (seq and
hash) at publication. An insider with database write access then cuts the log's tail together with its signatures and
checkpoints (the log alone still verifies), or rewrites and re-chains an entry the head covers: ``dsv audit --verify``
and ``dsv verify`` say UNTRUSTED (exit 13), naming the realization.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.trust import dsse
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.services.trust import signing, trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_audit_seal import rechain, rows, sql
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


@pytest.fixture
def published(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    """The registry URL, the ref of a signed publication, and the audit seq its statement signed as the head."""
    monkeypatch.setenv("DSV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSV_REGISTRY_URL", backend_url)
    with build_platform(load_settings()) as p:
        trust.current_identity(p)
        pw.register(p.registry)
        head = trust.records(p).audit_head()
        assert head is not None
        publisher = Publisher(p.registry, p.store, actor="admin", signer=signing.signer_of(p), gate=trust.gatekeeper(p))
        built = publisher.build(pw.request("req-head"))
        row = p.registry.signature_of(built.realization.id)
        assert row is not None
        statement = dsse.parse_statement(dsse.parse_envelope(p.store.get(row.envelope_object)))
        assert statement.audit_head == head, "the statement signs the newest entry before the publication"
        assert built.manifest.manifest_hash == statement.digest, "the head is in the statement, not the manifest"
        assert signing.check_signature(p, built.realization).trusted
        return backend_url, built.realization.ref, head[0]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out + out.err


def test_an_honest_log_holds_every_publication_head(published: tuple[str, str, int], capsys: pytest.CaptureFixture[str]) -> None:
    _, ref, _ = published
    code, out = run(capsys, "audit", "--verify", "--json")
    assert code == 0 and json.loads(out)["publication_heads"] == 1, out
    assert run(capsys, "verify", ref)[0] == 0


def test_a_tail_cut_with_its_checkpoints_behind_a_publication_is_untrusted(published: tuple[str, str, int], capsys: pytest.CaptureFixture[str]) -> None:
    url, ref, seq = published
    sql(url, *(f"DELETE FROM {table} WHERE seq >= {seq}" for table in ("audit_log", "audit_signatures", "audit_checkpoints")))
    with build_platform(load_settings()) as p:
        assert trust.records(p).verify_audit()["entries"] == seq - 1, "the log alone has nothing left to tell"
    code, out = run(capsys, "audit", "--verify")
    assert code == 13 and ref in out and f"no longer holds entry {seq}" in out, out
    code, out = run(capsys, "verify", ref)
    assert code == 13 and ref in out and "cut behind the publication" in out, out


def test_an_entry_rewritten_behind_a_publication_is_untrusted(published: tuple[str, str, int], capsys: pytest.CaptureFixture[str]) -> None:
    url, ref, seq = published
    entries = rows(url)
    entries[seq - 2].update(reason="rewritten")  # an entry before the head, re-chained: the head's hash changes
    rechain(url, entries)
    code, out = run(capsys, "verify", ref)
    assert code == 13 and ref in out and f"audit entry {seq} is not the one this publication's statement signed" in out, out
