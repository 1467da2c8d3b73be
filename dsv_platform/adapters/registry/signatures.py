"""Signed realization statements in the registry (migration 10): which envelope object signs which publication.

The signature row is written in the publication transaction itself (:meth:`RegistrySignatures.publish_signed`),
so a realization is never public without the signature its publisher made; the envelope bytes are an
object in the object store, named by their SHA-256.

Details: docs/trust.md ("Signatures")
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import aliases as al
from dsv_platform.adapters.registry import publication as pub
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.approval import audit_in
from dsv_platform.adapters.registry.signed_events import verify_alias, verify_state
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core.publication.records import PublishOutcome, PublishResult
from dsv_platform.core.publication.states import ConcurrentTransitionError, is_readable


@dataclass(frozen=True)
class SignatureRecord:
    """What the publisher signed: the envelope object (sha256 of its bytes), the signer identity and its key id."""

    manifest_hash: str
    envelope_object: str
    signer: str
    keyid: str
    signed_at: datetime | None = None


def _row(row: object) -> SignatureRecord:
    m = row._mapping  # type: ignore[attr-defined]
    return SignatureRecord(m["manifest_hash"], m["envelope_object"], m["signer"], m["keyid"], m["signed_at"])


def signature_of(conn: Connection, realization_id: int) -> SignatureRecord | None:
    row = conn.execute(select(s.signatures).where(s.signatures.c.realization_id == realization_id)).first()
    return None if row is None else _row(row)


def record_signature(conn: Connection, realization_id: int, signature: SignatureRecord, now: datetime) -> bool:
    """Insert the row once (a replayed publication keeps the first signature); True when inserted."""
    return pub.insert_ignore(
        conn,
        s.signatures,
        realization_id=realization_id,
        manifest_hash=signature.manifest_hash,
        envelope_object=signature.envelope_object,
        signer=signature.signer,
        keyid=signature.keyid,
        signed_at=now,
    )


class RegistrySignatures(RegistryTransactions):
    """The signature half of publication and its queries (a base of :class:`Registry`)."""

    def publish_signed(
        self, realization_id: int, request_id: str, signature: SignatureRecord, *, actor: str | None = None, audit_as: str | None = None
    ) -> PublishOutcome:
        """:meth:`Registry.publish`, the signature row and (``audit_as``) the ``publish`` audit entry in one transaction.

        The signature row is written only for the candidate it signs; the audit entry only when this call created the publication.
        """

        def work(conn: Connection) -> PublishOutcome:
            outcome = pub.publish(conn, realization_id, request_id, actor=actor, now=self._now())
            mine = outcome.realization.id == realization_id and outcome.result in (PublishResult.CREATED, PublishResult.REPLAYED)
            if mine and outcome.realization.manifest_hash == signature.manifest_hash:
                record_signature(conn, realization_id, signature, self._now())
            if outcome.created:
                audit_in(conn, audit_as, "publish", outcome.realization.ref, reason=None, now=self._now(), detail={"request_id": request_id})
            return outcome

        return self._retrying(work, also=(ConcurrentTransitionError,))

    def signature_of(self, realization_id: int) -> SignatureRecord | None:
        """The signature recorded with this realization's publication, or None (published unsigned)."""
        with self._read() as conn:
            return signature_of(conn, realization_id)

    def verify_signed_state(self) -> dict[str, int]:
        """Check every published realization's state and every alias against their signed events (``dsv audit --verify``).

        Raises UntrustedError naming the first that no valid signature backs; returns how many of each were checked.
        """
        with self._read() as conn:
            rows = conn.execute(select(s.realizations).join(s.publication_claims, s.publication_claims.c.realization_id == s.realizations.c.id))
            realizations = [q.realization_from_row(row) for row in rows]
            for r in realizations:
                verify_state(conn, r, r.ref, signature=is_readable(r.state))
            aliases = [al.get_alias(conn, a.dataset, a.version, a.alias) for a in conn.execute(select(s.aliases))]
            for record in aliases:
                if record is not None:
                    verify_alias(conn, record, f"{record.dataset}:{record.version}@{record.alias}")
        return {"realizations": len(realizations), "aliases": len(aliases)}

    def signing_since(self) -> datetime | None:
        """When this registry recorded its first signature (None: never): publications after it must be signed."""
        with self._read() as conn:
            moment: datetime | None = conn.execute(select(func.min(s.signatures.c.signed_at))).scalar()  # typed: UTC-aware
        return moment
