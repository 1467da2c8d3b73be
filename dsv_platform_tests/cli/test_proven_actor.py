"""Issue 24 item 6: who acted is the identity that proved its key, in every record and every report, never free text.

Before: ``dsv verify`` reported ``approved_by`` from ``DSV_ACTOR``/``$USER`` (``['someone-else']``) while the audit log
said ``admin``; consumptions, alias moves and the other registry events recorded the same free text. On the real
registries (SQLite and PostgreSQL), with ``DSV_ACTOR`` and ``USER`` set to ``someone-else`` throughout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from dsv_platform import open_dataset
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_platform
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]
BASE = f"{pw.NAME}:{pw.VERSION}"
CLAIMED = "someone-else"


def test_every_record_and_report_names_the_proven_identity(
    backend_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"DSV_HOME": str(tmp_path / "home"), "DSV_REGISTRY_URL": backend_url, "DSV_OBJECT_STORE": str(tmp_path / "objects")}
    monkeypatch.setenv("DSV_ACTOR", CLAIMED)
    monkeypatch.setenv("USER", CLAIMED)
    with build_platform(load_settings(env)) as p:
        trust.current_identity(p)  # admin proves its key: every event from here on is signed by it
        pw.register(p.registry)
        built = pw.build(p.registry, LocalObjectStore(tmp_path / "objects"), "r-1", logical_key="1", parts=pw.partitions(seed=3))
        assert p.actor == "admin"
    ref = f"{BASE}@sha256:{built.manifest.manifest_hash}"
    dsv = DsvCli(capsys, monkeypatch, env)
    assert dsv("identity", "create", "carol").code == 0
    for role in ("approver", "consumer"):
        assert dsv("grants", "add", "carol", role, "--reason", "reviews releases").code == 0

    approved = dsv("approve", ref, "--reason", "quality report reviewed", "--json", identity="carol")
    assert approved.code == 0 and json.loads(approved.out)["actor"] == "carol", approved
    assert dsv("alias", "set", f"{BASE}@production", built.manifest.manifest_hash).code == 0
    verified = dsv("verify", ref, "--json")
    assert verified.code == 0, verified
    assert json.loads(verified.out)["approved_by"] == ["carol"]
    text = dsv("verify", ref)
    assert "approved by carol" in text.out and CLAIMED not in text.out, text
    history = dsv("alias", "history", f"{BASE}@production", "--json")
    assert [m["actor"] for m in json.loads(history.out)] == ["admin"], history
    assert dsv("resolve", f"{BASE}@production", "--json", identity="carol").code == 0
    with open_dataset(f"{BASE}@production", settings=load_settings(env | {"DSV_IDENTITY": "carol"}), actor=CLAIMED):  # a claim, never recorded
        pass
    audit = dsv("audit", "--json")
    assert CLAIMED not in audit.out and {"admin", "carol"} <= {e["identity"] for e in json.loads(audit.out)}, audit

    with Registry.from_url(backend_url) as reg, reg.engine.connect() as conn:
        actors = {t.name: {r.actor for r in conn.execute(select(t.c.actor))} for t in (s.realization_events, s.alias_history, s.consumption_records)}
        events = reg.events(built.realization.id)
    assert actors == {"realization_events": {"builder", "carol"}, "alias_history": {"admin"}, "consumption_records": {"carol"}}, actors
    # the builder's events carry the free text its caller passed ("builder"); each is signed, so the report names the signer
    assert {e.actor for e in events} == {"admin", "carol"}
