"""adapters/registry/signatures.py on SQLite and PostgreSQL: the signature row is written in the publication
transaction, only for the candidate it signs, once; the table is append-only; ``signing_since`` is its first row."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlalchemy.exc import DBAPIError

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.signatures import SignatureRecord
from dsv_platform.core.publication.records import PublishResult
from dsv_platform_tests.adapters.test_registry import NAME, VERSION, registry, registry_url, sealed

__all__ = ["registry", "registry_url"]


def record(manifest_hash: str, tag: str = "a") -> SignatureRecord:
    return SignatureRecord(manifest_hash=manifest_hash, envelope_object=tag * 64, signer="publisher-1", keyid="k" * 64)


def test_publish_signed_records_the_signature_with_the_publication(registry: Registry) -> None:
    assert registry.signing_since() is None
    rid, manifest = sealed(registry, "signed", logical_key="lk-signed")
    outcome = registry.publish_signed(rid, f"pub-{rid}", record(manifest.manifest_hash), actor="publisher-1")
    assert outcome.result is PublishResult.CREATED
    row = registry.signature_of(rid)
    assert row is not None and (row.manifest_hash, row.envelope_object, row.signer) == (manifest.manifest_hash, "a" * 64, "publisher-1")
    assert row.signed_at is not None and registry.signing_since() == row.signed_at
    again = registry.publish_signed(rid, f"pub-{rid}", record(manifest.manifest_hash, "b"), actor="publisher-1")
    assert again.result is PublishResult.REPLAYED and registry.signature_of(rid).envelope_object == "a" * 64  # type: ignore[union-attr]


def test_a_loser_writes_no_signature_for_the_winner(registry: Registry) -> None:
    first, manifest = sealed(registry, "same", logical_key="lk-same")
    registry.publish_signed(first, "pub-first", record(manifest.manifest_hash), actor="p")
    second = registry.create_candidate(NAME, VERSION, "create-second", "lk-same-2", "builder")
    registry.seal(second, manifest)
    lost = registry.publish_signed(second, "pub-second", record(manifest.manifest_hash, "c"), actor="p")
    assert lost.result is PublishResult.SAME_MANIFEST and lost.realization.id == first
    assert registry.signature_of(second) is None and registry.signature_of(first).envelope_object == "a" * 64  # type: ignore[union-attr]


def test_a_signature_for_another_manifest_is_not_recorded(registry: Registry) -> None:
    rid, _ = sealed(registry, "other", logical_key="lk-other")
    registry.publish_signed(rid, f"pub-{rid}", record("f" * 64), actor="p")
    assert registry.signature_of(rid) is None


def test_signatures_are_append_only(registry: Registry) -> None:
    rid, manifest = sealed(registry, "frozen", logical_key="lk-frozen")
    registry.publish_signed(rid, f"pub-{rid}", record(manifest.manifest_hash), actor="p")
    with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
        conn.execute(update(s.signatures).where(s.signatures.c.realization_id == rid).values(signer="mallory"))
