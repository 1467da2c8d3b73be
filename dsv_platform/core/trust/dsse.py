"""DSSE envelopes around in-toto Statements: what a publisher signs for a realization (pure; no key handling).

PAE and the envelope follow the DSSE v1 protocol; the statement is an in-toto Statement v1
whose subject is ``dataset:<name>:<version>`` with the manifest hash as its sha256 digest.
The signature bytes come from the caller (services/trust/signing.py holds the keys).

Details: docs/trust.md ("Signatures")
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://dsv-platform.dev/realization/v1"
PREDICATE_KEYS = frozenset({"builder", "publisher", "sources", "code", "quality_report", "content_hash", "manifest_hash"})
OPTIONAL_PREDICATE_KEYS = frozenset({"audit_head", "dataset_card", "launch"})  # dataset_card: the card object stored at publication
"""Keys a newer statement carries and an older one lacks: ``audit_head`` ({seq, hash} of the newest audit entry when it was signed),
``launch`` (the Dagster launch the builder came from, null for a build outside Dagster: the approval rules read it, docs/trust.md)."""
LAUNCH_KEYS = frozenset({"launcher", "service", "run_id", "job", "nonce", "reason"})
NO_LAUNCH: Mapping[str, Any] = {}
"""``launch=NO_LAUNCH``: a statement without the key (as before it was signed); ``launch=None`` signs that there was no launch."""


class EnvelopeError(DsvError):
    """An envelope or statement does not parse or does not say what a realization statement must (the message names what)."""


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body`` (lengths in ASCII decimal bytes)."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def keyid_of(public_key: bytes) -> str:
    """A key's id: the lowercase hex SHA-256 of its raw public key bytes."""
    return hashlib.sha256(public_key).hexdigest()


def subject_name(dataset: str, version: str) -> str:
    return f"dataset:{dataset}:{version}"


@dataclass(frozen=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    def signed_bytes(self) -> bytes:
        """What every signature signs: the PAE of the payload type and payload."""
        return pae(self.payload_type, self.payload)

    def to_bytes(self) -> bytes:
        """Canonical JSON: ``payload`` and ``sig`` in standard base64, as DSSE writes them."""
        doc = {
            "payload": base64.b64encode(self.payload).decode("ascii"),
            "payloadType": self.payload_type,
            "signatures": [{"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")} for s in self.signatures],
        }
        return canonical_json.dumps(doc)


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise EnvelopeError(f"envelope {what} must be a base64 string, got {type(value).__name__}")
    try:
        return base64.b64decode(value.replace("-", "+").replace("_", "/") + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"envelope {what} is not base64 ({exc})") from exc


def parse_envelope(data: bytes) -> Envelope:
    """An envelope from its JSON bytes; one signature at least, each with a keyid and a sig."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EnvelopeError(f"envelope is not JSON ({exc})") from exc
    if not isinstance(doc, Mapping) or not isinstance(doc.get("payloadType"), str):
        raise EnvelopeError("envelope must be an object with a string payloadType")
    sigs = doc.get("signatures")
    if not isinstance(sigs, list) or not sigs:
        raise EnvelopeError("envelope has no signatures")
    parsed = []
    for i, s in enumerate(sigs):
        if not isinstance(s, Mapping) or not isinstance(s.get("keyid", ""), str):
            raise EnvelopeError(f"envelope signatures[{i}] must be an object with a string keyid")
        parsed.append(Signature(keyid=str(s.get("keyid", "")), sig=_b64(s.get("sig"), f"signatures[{i}].sig")))
    return Envelope(payload_type=doc["payloadType"], payload=_b64(doc.get("payload"), "payload"), signatures=tuple(parsed))


def realization_statement(
    *, dataset: str, version: str, manifest_hash: str, content_hash: str, builder: str, publisher: str,
    sources: list[dict[str, Any]], code: Mapping[str, Any] | None, quality_report: str | None,
    audit_head: tuple[int, str] | None = None, dataset_card: str | None = None, launch: Mapping[str, Any] | None = NO_LAUNCH,
) -> dict[str, Any]:  # fmt: skip
    """The in-toto Statement a publisher signs: subject = the manifest hash; predicate = who built and published it from what."""
    predicate = {
        "builder": builder,
        "publisher": publisher,
        "sources": sources,
        "code": dict(code) if code is not None else None,
        "quality_report": quality_report,
        "content_hash": content_hash,
        "manifest_hash": manifest_hash,
    }
    if audit_head is not None:  # the log's head at publication: dsv verify checks the log still holds it
        predicate["audit_head"] = {"seq": audit_head[0], "hash": audit_head[1]}
    if dataset_card is not None:  # the dataset card stored at publication (services/publication/card.py)
        predicate["dataset_card"] = dataset_card
    if launch is not NO_LAUNCH:  # the launch row at publication (None: not a Dagster build): a changed row is UNTRUSTED at approval
        predicate["launch"] = None if launch is None else {k: launch[k] for k in sorted(LAUNCH_KEYS)}
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name(dataset, version), "digest": {"sha256": manifest_hash}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


@dataclass(frozen=True)
class Statement:
    """A parsed, validated realization statement."""

    subject: str
    digest: str
    predicate: Mapping[str, Any]

    @property
    def publisher(self) -> str:
        return str(self.predicate["publisher"])

    @property
    def builder(self) -> str:
        return str(self.predicate["builder"])

    @property
    def audit_head(self) -> tuple[int, str] | None:
        """The (seq, entry hash) of the newest audit entry when this was signed; None in a statement from before it was recorded."""
        head = self.predicate.get("audit_head")
        return None if head is None else (int(head["seq"]), str(head["hash"]))

    @property
    def signs_launch(self) -> bool:
        """Whether the statement says how the build was launched (``launch``, possibly null); older statements do not."""
        return "launch" in self.predicate

    @property
    def launch(self) -> Mapping[str, Any] | None:
        """The signed launch (``launcher``, ``service``, ``run_id``, ``job``, ``nonce``, ``reason``); None: no launch, or not signed."""
        launch = self.predicate.get("launch")
        return None if launch is None else dict(launch)


def parse_statement(envelope: Envelope) -> Statement:
    """The envelope's statement, refusing any other payload type, statement type, predicate type or subject shape."""
    if envelope.payload_type != PAYLOAD_TYPE:
        raise EnvelopeError(f"payloadType is {envelope.payload_type!r}, expected {PAYLOAD_TYPE!r}")
    try:
        doc = json.loads(envelope.payload.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EnvelopeError(f"statement is not JSON ({exc})") from exc
    if not isinstance(doc, Mapping) or doc.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError(f"statement _type must be {STATEMENT_TYPE!r}")
    if doc.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeError(f"predicateType is {doc.get('predicateType')!r}, expected {PREDICATE_TYPE!r}")
    subjects = doc.get("subject")
    if not isinstance(subjects, list) or len(subjects) != 1 or not isinstance(subjects[0], Mapping):
        raise EnvelopeError("statement must name exactly one subject")
    name, digest = subjects[0].get("name"), subjects[0].get("digest")
    if not isinstance(name, str) or not isinstance(digest, Mapping) or not isinstance(digest.get("sha256"), str):
        raise EnvelopeError("statement subject must have a name and a sha256 digest")
    predicate = doc.get("predicate")
    if not isinstance(predicate, Mapping) or not PREDICATE_KEYS <= set(predicate) <= PREDICATE_KEYS | OPTIONAL_PREDICATE_KEYS:
        raise EnvelopeError(f"statement predicate must have exactly the keys {sorted(PREDICATE_KEYS)} (and optionally {sorted(OPTIONAL_PREDICATE_KEYS)})")
    head = predicate.get("audit_head")
    if head is not None and not (isinstance(head, Mapping) and set(head) == {"seq", "hash"} and type(head["seq"]) is int and isinstance(head["hash"], str)):
        raise EnvelopeError("statement predicate audit_head must be {seq: integer, hash: string}")
    launch = predicate.get("launch")
    if launch is not None and not (isinstance(launch, Mapping) and set(launch) == LAUNCH_KEYS and all(isinstance(v, str | None) for v in launch.values())):
        raise EnvelopeError(f"statement predicate launch must be null or {{{', '.join(sorted(LAUNCH_KEYS))}: string or null}}")
    if not isinstance(predicate["publisher"], str) or not isinstance(predicate["builder"], str):
        raise EnvelopeError("statement predicate must name the builder and the publisher")
    return Statement(subject=name, digest=digest["sha256"], predicate=predicate)
