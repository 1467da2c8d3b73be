"""Quarantine records (migration 8) on SQLite and PostgreSQL: one transaction per step, two-person release, append-only releases."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from dsv_platform.adapters.registry.quarantine import QuarantineRecords, QuarantineStateError
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.trust import TrustRecords
from dsv_platform.core.errors import AccessDeniedError
from dsv_platform.core.publication.states import RealizationState as S
from dsv_platform.core.trust.trust import verify_chain
from dsv_platform_tests.adapters.test_registry import published, registry, registry_url, sealed

__all__ = ["registry", "registry_url"]


def entry(manifest_hash: str) -> dict[str, object]:
    return {"node": f"realization:{manifest_hash}", "kind": "realization", "id": manifest_hash, "depth": 2}


def test_a_raw_batch_quarantine_holds_its_realizations_until_two_identities_release_it(registry: Registry) -> None:
    records = QuarantineRecords(registry.engine)
    a_id, a = published(registry)
    b_id, b = published(registry)
    e_id, _ = published(registry)
    registry.transition(e_id, S.EXPIRED, "gone", "gc")
    model = {"node": "model_run:" + "9" * 64, "kind": "model_run", "id": "9" * 64, "depth": 3}
    raw = records.create(
        "raw_batch",
        "raw:tx/b1",
        "raw:tx/b1",
        reason="unexpected writer",
        actor="op-a",
        evidence={"batch_refs": ["b1@" + "a" * 64]},
        affected=[entry(a.manifest_hash), entry(b.manifest_hash), entry(registry.get(e_id).manifest_hash or ""), model],
    )
    assert [x.get("quarantined") for x in raw.affected] == [True, True, False, None]
    assert registry.get(a_id).state is S.QUARANTINED and registry.get(e_id).state is S.EXPIRED
    assert records.quarantined_batches() == {"b1@" + "a" * 64: raw.id}
    own = records.create("realization", b.manifest_hash, "b", reason="also suspect", actor="op-a", evidence={}, affected=[entry(b.manifest_hash)])

    with pytest.raises(QuarantineStateError, match="nothing to approve"):
        records.approve_release(raw.id, identity="op-b", reason="early")
    records.request_release(raw.id, identity="op-a", reason="cleared")
    with pytest.raises(QuarantineStateError, match="RELEASE_PENDING"):
        records.request_release(raw.id, identity="op-a", reason="again")
    with pytest.raises(AccessDeniedError, match="'op-a' requested the release"):
        records.approve_release(raw.id, identity="op-a", reason="me")
    done, released = records.approve_release(raw.id, identity="op-b", reason="agreed")
    assert done.state == "RELEASED" and [r["action"] for r in done.releases] == ["request", "approve"]
    assert released == [registry.get(a_id).ref]  # b stays: its own quarantine still holds it
    assert registry.get(a_id).state is S.PUBLISHED and registry.get(b_id).state is S.QUARANTINED
    assert records.quarantined_batches() == {} and [r.id for r in records.records(active_only=True)] == [own.id]
    trail = TrustRecords(registry.engine).audit_entries()  # each step audited in its own transaction, refused ones not at all
    assert [(e["identity"], e["action"], e["target"]) for e in trail] == [
        ("op-a", "quarantine", "raw:tx/b1"),
        ("op-a", "quarantine", "b"),
        ("op-a", "release", "raw:tx/b1"),
        ("op-b", "release.approve", "raw:tx/b1"),
    ]
    assert trail[0]["detail"]["quarantined"] == [f"realization:{a.manifest_hash}", f"realization:{b.manifest_hash}"] and verify_chain(trail) == []
    with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
        conn.execute(text("DELETE FROM quarantine_releases"))


def test_a_sealed_candidate_can_be_quarantined_but_is_not_published_on_release(registry: Registry) -> None:
    records = QuarantineRecords(registry.engine)
    rid, m = sealed(registry)
    q = records.create("realization", m.manifest_hash, "cand", reason="suspect", actor="op-a", evidence={}, affected=[entry(m.manifest_hash)])
    assert registry.get(rid).state is S.QUARANTINED
    records.request_release(q.id, identity="op-a", reason="ok")
    assert records.approve_release(q.id, identity="op-b", reason="ok")[1] == []  # never published: stays QUARANTINED for review
    assert registry.get(rid).state is S.QUARANTINED
