"""Signed manifests: the publisher signs each realization's statement; readers verify it before reading.

:func:`sign_realization` builds the in-toto statement (subject = the manifest hash), wraps it in a DSSE
envelope signed with the publisher identity's Ed25519 key, and stores the envelope as an object.
:func:`check_signature` says whether a realization's envelope verifies (signature under the signer's
registered key, the signer holds the publisher role, the subject is the manifest hash the registry names);
:func:`require_trusted` raises :class:`UntrustedError` (exit 13) otherwise.

Details: docs/trust.md ("Signatures")
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.signatures import SignatureRecord
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import AccessDeniedError, AuditTamperedError, ObjectStoreError, UntrustedError
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust import dsse
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust import trust

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

log = logging.getLogger(__name__)

VALID, INVALID, MISSING = "valid", "invalid", "missing"


@dataclass(frozen=True)
class Signer:
    """An identity able to sign: its name, raw Ed25519 public key and a signing function."""

    identity: str
    public_key: bytes
    sign: Callable[[bytes], bytes]

    @property
    def keyid(self) -> str:
        return dsse.keyid_of(self.public_key)


def signer_of(platform: Platform) -> Signer:
    """The platform's current identity as a signer (its private key must be in the home's key folder)."""
    who = trust.current_identity(platform)
    return Signer(identity=who.name, public_key=who.public_key, sign=lambda data: trust.sign_bytes(platform, data, identity=who.name))


def sign_realization(
    signer: Signer, store: ObjectStore, manifest: Manifest, *, builder: str, quality_report: str | None, audit_head: tuple[int, str] | None = None,
    dataset_card: str | None = None, launch: Mapping[str, Any] | None = dsse.NO_LAUNCH,
) -> SignatureRecord:
    """Sign ``manifest``'s statement as ``signer``; the envelope is stored as an object (its SHA-256 names it)."""
    statement = dsse.realization_statement(
        dataset=manifest.dataset,
        version=manifest.version,
        manifest_hash=manifest.manifest_hash,
        content_hash=manifest.content_hash,
        builder=builder,
        publisher=signer.identity,
        sources=[s.to_document() for s in manifest.sources],
        code=manifest.code.to_document() if manifest.code else None,
        quality_report=quality_report,
        audit_head=audit_head,
        dataset_card=dataset_card,
        launch=launch,
    )
    payload = canonical_json.dumps(statement)
    signature = signer.sign(dsse.pae(dsse.PAYLOAD_TYPE, payload))
    envelope = dsse.Envelope(dsse.PAYLOAD_TYPE, payload, (dsse.Signature(signer.keyid, signature),))
    obj = store.put(envelope.to_bytes())
    return SignatureRecord(manifest_hash=manifest.manifest_hash, envelope_object=obj, signer=signer.identity, keyid=signer.keyid)


@dataclass(frozen=True)
class SignatureStatus:
    """What a realization's signature says: ``valid``, ``invalid`` or ``missing``, and whether a read may go ahead."""

    ref: str
    status: str
    trusted: bool
    reason: str
    signer: str | None = None
    keyid: str | None = None
    builder: str | None = None
    publisher: str | None = None
    envelope_object: str | None = None

    def to_document(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "trusted": self.trusted,
            "reason": self.reason,
            "signer": self.signer,
            "keyid": self.keyid,
            "builder": self.builder,
            "publisher": self.publisher,
            "envelope_object": self.envelope_object,
        }


def _missing(platform: Platform, realization: Realization) -> SignatureStatus:
    ref = realization.ref
    if trust.is_strict(platform):
        return SignatureStatus(ref, MISSING, False, "no signed statement, and a strict home reads only signed realizations")
    since = platform.registry.signing_since()
    published = realization.published_at
    if since is not None and (published is None or published >= since):
        return SignatureStatus(ref, MISSING, False, f"no signed statement, though this registry signs every publication since {since.isoformat()}")
    return SignatureStatus(ref, MISSING, True, "published before signing was enabled (allowed with a warning outside a strict home)")


def _verify(platform: Platform, realization: Realization, row: SignatureRecord) -> SignatureStatus:
    ref = realization.ref
    base = {"signer": row.signer, "keyid": row.keyid, "envelope_object": row.envelope_object}

    def bad(reason: str, **more: str) -> SignatureStatus:
        return SignatureStatus(ref, INVALID, False, reason, **(base | more))

    try:
        envelope = dsse.parse_envelope(platform.store.get(row.envelope_object, verify=True))
        statement = dsse.parse_statement(envelope)
    except ObjectStoreError as exc:
        return bad(f"envelope object {row.envelope_object} cannot be read ({exc})")
    except dsse.EnvelopeError as exc:
        return bad(f"envelope object {row.envelope_object}: {exc}")
    who = {"builder": statement.builder, "publisher": statement.publisher}
    if statement.subject != dsse.subject_name(realization.dataset, realization.version) or statement.digest != realization.manifest_hash:
        return bad(
            f"the statement signs {statement.subject}@sha256:{statement.digest}, not the manifest the registry names ({realization.manifest_hash})", **who
        )
    if statement.publisher != row.signer:
        return bad(f"the statement names publisher {statement.publisher!r} but the registry records signer {row.signer!r}", **who)
    try:
        key = trust.public_key_of(platform, row.signer)
    except UntrustedError as exc:
        return bad(str(exc).removeprefix("UNTRUSTED: "), **who)
    if key is None:
        return bad(f"signer {row.signer!r} has no registered public key", **who)
    if not any(s.keyid == dsse.keyid_of(key) and trust.verify_signature(key, s.sig, envelope.signed_bytes()) for s in envelope.signatures):
        return bad(f"no signature in the envelope verifies under {row.signer!r}'s registered key {dsse.keyid_of(key)}", **who)
    try:
        trust.require(platform, Role.PUBLISHER, definition=f"{realization.dataset}:{realization.version}", identity=row.signer)
    except (AccessDeniedError, UntrustedError) as exc:
        return bad(f"signer {row.signer!r} does not hold the publisher role for {realization.dataset}:{realization.version} ({exc})", **who)
    if (cut := audit_head_problem(platform, statement)) is not None:
        return bad(cut, **who)
    return SignatureStatus(ref, VALID, True, f"signed by publisher {row.signer!r}", **(base | who))


def audit_head_problem(platform: Platform, statement: dsse.Statement) -> str | None:
    """Why the audit log no longer holds the head ``statement`` signed (cut or rewritten behind the publication); None when it does."""
    head = statement.audit_head
    if head is None:  # a statement from before the head was signed
        return None
    seq, signed = head
    now = trust.records(platform).audit_hash_at(seq)
    if now is None:
        return f"the audit log no longer holds entry {seq}, the head this publication's statement signed: the log was cut behind the publication"
    if now != signed:
        return f"audit entry {seq} is not the one this publication's statement signed (hash {now[:16]}..., signed {signed[:16]}...): the log was rewritten"
    return None


def signed_statements(platform: Platform) -> Iterator[tuple[Realization, dsse.Statement]]:
    """Every signed realization with its statement, for the ``dsv audit --verify`` walks; an unreadable envelope is
    skipped here (``dsv verify`` refuses it)."""
    for realization in platform.registry.realizations_in(frozenset(RealizationState)):
        row = platform.registry.signature_of(realization.id)
        if row is None:
            continue
        try:
            statement = dsse.parse_statement(dsse.parse_envelope(platform.store.get(row.envelope_object, verify=True)))
        except (ObjectStoreError, dsse.EnvelopeError):
            continue
        yield realization, statement


def verify_publication_heads(platform: Platform) -> int:
    """Every signed publication's audit head is still in the log (``dsv audit --verify``); AuditTamperedError naming the first that is not.

    Returns how many heads were checked; an unreadable envelope is skipped here (``dsv verify`` refuses it).
    """
    checked = 0
    for realization, statement in signed_statements(platform):
        if (problem := audit_head_problem(platform, statement)) is not None:
            raise AuditTamperedError(f"{realization.ref}: {problem}", ref=realization.ref, detail={"audit_head": list(statement.audit_head or ())})
        checked += statement.audit_head is not None
    return checked


def check_signature(platform: Platform, realization: Realization) -> SignatureStatus:
    """The realization's signature status (never raises for a bad signature: :func:`require_trusted` does)."""
    row = platform.registry.signature_of(realization.id)
    return _missing(platform, realization) if row is None else _verify(platform, realization, row)


def require_trusted(platform: Platform, realization: Realization) -> SignatureStatus:
    """Raise :class:`UntrustedError` naming the ref and what failed, unless the realization's signature is trusted."""
    status = check_signature(platform, realization)
    if not status.trusted:
        detail: dict[str, object] = {"signature": status.status, "signer": status.signer, "keyid": status.keyid, "manifest_hash": realization.manifest_hash}
        raise UntrustedError(f"{realization.ref}: {status.status} signature: {status.reason}", ref=realization.ref, detail=detail)
    if status.status == MISSING:
        log.warning("%s is unsigned: %s", realization.ref, status.reason)
    return status


def built_by(platform: Platform, realization: Realization) -> str:
    """The identity that built the realization (the trust records; before them, the candidate's creator)."""
    return trust.builder_of(platform, realization.id) or realization.created_by


def approvers(platform: Platform, realization: Realization) -> list[str]:
    """The identities that approved the realization (PUBLISHED -> ELIGIBLE events), oldest first."""
    return [e.actor for e in platform.registry.events(realization.id) if e.to_state is RealizationState.ELIGIBLE]


__all__ = [
    "SignatureStatus",
    "Signer",
    "approvers",
    "built_by",
    "check_signature",
    "require_trusted",
    "sign_realization",
    "signed_statements",
    "signer_of",
    "verify_publication_heads",
]
