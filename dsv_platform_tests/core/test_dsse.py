"""core/trust/dsse.py: PAE (the DSSE spec's example), envelope round trip, statement build and validation."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from dsv_platform.core import canonical_json
from dsv_platform.core.trust import dsse

HASH = "a" * 64


def statement(**over: object) -> dict[str, object]:
    doc = dsse.realization_statement(
        dataset="fraud_training_set",
        version="v6",
        manifest_hash=HASH,
        content_hash="b" * 64,
        builder="builder-1",
        publisher="publisher-1",
        sources=[{"table": "transactions", "snapshot_id": "42", "tag": "t", "attributes": {}}],
        code={"commit": "c" * 40, "dirty": False},
        quality_report="d" * 64,
    )
    return doc | over


def envelope_of(doc: object, payload_type: str = dsse.PAYLOAD_TYPE) -> dsse.Envelope:
    return dsse.Envelope(payload_type, canonical_json.dumps(doc), (dsse.Signature("k" * 64, b"sig-bytes"),))


def test_pae_matches_the_dsse_spec_example() -> None:
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_pae_counts_bytes_not_characters() -> None:
    assert dsse.pae("t", "é".encode()) == b"DSSEv1 1 t 2 \xc3\xa9"
    assert dsse.pae("", b"") == b"DSSEv1 0  0 "


def test_envelope_round_trips_with_standard_base64() -> None:
    env = envelope_of(statement())
    doc = json.loads(env.to_bytes())
    assert doc["payloadType"] == dsse.PAYLOAD_TYPE and base64.b64decode(doc["payload"]) == env.payload
    assert doc["signatures"] == [{"keyid": "k" * 64, "sig": base64.b64encode(b"sig-bytes").decode()}]
    assert dsse.parse_envelope(env.to_bytes()) == env
    assert env.signed_bytes() == dsse.pae(dsse.PAYLOAD_TYPE, env.payload)


def test_statement_names_the_manifest_hash_as_its_subject() -> None:
    parsed = dsse.parse_statement(envelope_of(statement()))
    assert (parsed.subject, parsed.digest) == ("dataset:fraud_training_set:v6", HASH)
    assert (parsed.builder, parsed.publisher) == ("builder-1", "publisher-1")
    assert parsed.predicate["quality_report"] == "d" * 64 and parsed.predicate["code"]["commit"] == "c" * 40


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "not JSON"),
        (b'{"payloadType": "x", "payload": "e30=", "signatures": []}', "no signatures"),
        (b'{"payloadType": "x", "payload": "***", "signatures": [{"keyid": "k", "sig": "c2ln"}]}', "payload is not base64"),
        (b'{"payload": "e30=", "signatures": [{"keyid": "k", "sig": "c2ln"}]}', "payloadType"),
    ],
)
def test_malformed_envelopes_are_refused_naming_what(data: bytes, message: str) -> None:
    with pytest.raises(dsse.EnvelopeError, match=message):
        dsse.parse_envelope(data)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (envelope_of(statement(), payload_type="text/plain"), "payloadType"),
        (envelope_of(statement(_type="https://in-toto.io/Statement/v0.1")), "_type"),
        (envelope_of(statement(predicateType="https://example.com/other")), "predicateType"),
        (envelope_of(statement(subject=[])), "exactly one subject"),
        (envelope_of(statement(subject=[{"name": "x", "digest": {"sha512": HASH}}])), "sha256 digest"),
        (envelope_of(statement(predicate={"builder": "b"})), "predicate must have exactly"),
    ],
)
def test_statements_of_another_shape_are_refused(env: dsse.Envelope, message: str) -> None:
    with pytest.raises(dsse.EnvelopeError, match=message):
        dsse.parse_statement(env)


def test_keyid_is_the_sha256_of_the_public_key() -> None:
    assert dsse.keyid_of(b"\x00" * 32) == hashlib.sha256(b"\x00" * 32).hexdigest() == "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925"


def test_a_statement_with_the_audit_head_parses_and_one_without_still_does() -> None:
    old = dsse.parse_statement(envelope_of(statement()))
    assert old.audit_head is None and "audit_head" not in old.predicate  # statements from before the head was signed
    doc = statement()
    doc["predicate"] = {**doc["predicate"], "audit_head": {"seq": 12, "hash": "e" * 64}}  # type: ignore[dict-item]
    assert dsse.parse_statement(envelope_of(doc)).audit_head == (12, "e" * 64)
    for bad in ({"seq": "12", "hash": "e" * 64}, {"seq": 12}, {"seq": True, "hash": "e"}, "12"):
        doc["predicate"] = {**doc["predicate"], "audit_head": bad}  # type: ignore[dict-item]
        with pytest.raises(dsse.EnvelopeError, match="audit_head"):
            dsse.parse_statement(envelope_of(doc))
