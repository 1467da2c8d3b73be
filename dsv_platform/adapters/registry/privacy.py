"""Registry records of privacy deletion: the subject index, deletion requests and per-descendant outcomes.

Reach them through ``registry.privacy``. A request, its redaction generation and
its plan (migration 13, ``privacy_plans``) are written in one transaction, so a
generation is raised once per request id however often the request is rerun, and
a request completes only when every planned descendant has its outcome.
Subjects appear only as keyed hashes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy import Column, ForeignKey, Table, Text, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError, FailureKind
from dsv_platform.core.privacy.privacy import Decision, Descendant, decision_from_document

T = TypeVar("T")


class Transactions(Protocol):
    """What the privacy records need of the registry (kept as a protocol: no import back into registry.py)."""

    def _read(self) -> AbstractContextManager[Connection]: ...
    def _write(self) -> AbstractContextManager[Connection]: ...
    def _retrying(self, work: Callable[[Connection], T]) -> T: ...
    def _now(self) -> datetime: ...

privacy_plans = Table(  # migration 13: what a request must do, recorded with the request (its completion needs every outcome)
    "privacy_plans",
    s.metadata,
    Column("request_id", s.NAME, ForeignKey("privacy_requests.request_id"), primary_key=True),
    Column("decisions_json", Text, nullable=False),
    Column("recorded_at", s.UtcDateTime, nullable=False),
)


class PrivacyIncompleteError(DsvError):
    """A deletion request has planned descendants without a recorded outcome: it is not complete (fail closed)."""

    kind = FailureKind.FAILED


SUBJECT_KEY_PROPERTY = "privacy.subject_key_id"  # registry_properties: the key subject hashes are keyed with (recorded once)
MODEL_KINDS = ("model_run", "model", "model_version", "artifact")  # what a deletion's governance decision lists


@dataclass(frozen=True)
class IndexEntry:
    subject_key_hash: str
    descendant: Descendant
    version: str | None = None


@dataclass(frozen=True)
class PrivacyRequest:
    request_id: str
    subject_key_hash: str
    generation: int
    reason: str
    actor: str
    completed: bool


def _request(row: Any) -> PrivacyRequest:
    return PrivacyRequest(row.request_id, row.subject_key_hash, int(row.generation), row.reason, row.actor, row.completed_at is not None)



def _planned(conn: Connection, request_id: str) -> list[Decision]:
    row = conn.execute(select(privacy_plans.c.decisions_json).where(privacy_plans.c.request_id == request_id)).first()
    return [] if row is None else [decision_from_document(d) for d in json.loads(row.decisions_json)]


def _insert_entries(conn: Connection, entries: Sequence[IndexEntry], now: datetime) -> None:
    """Write subject index entries (salted subject hashes only, never raw keys)."""
    rows = [
        {
            "subject_key_hash": e.subject_key_hash,
            "kind": e.descendant.kind.value,
            "descendant_id": e.descendant.id,
            "manifest_hash": e.descendant.manifest_hash,
            "dataset": e.descendant.dataset,
            "version": e.version,
            "rows": e.descendant.rows,
            "indexed_at": now,
        }
        for e in entries
    ]
    if rows:
        conn.execute(insert(s.subject_index), rows)

class PrivacyRecords:
    """The privacy tables of one registry (built by ``Registry.privacy``)."""

    def __init__(self, registry: Transactions) -> None:
        self.registry = registry

    # ------------------------------------------------------------ subject index

    def scanned_manifests(self) -> set[str]:
        with self.registry._read() as conn:
            return set(conn.execute(select(s.subject_index_scans.c.manifest_hash)).scalars())

    def record_scan(self, manifest_hash: str, subject_column: str | None, entries: Sequence[IndexEntry]) -> bool:
        """Record one manifest's index entries with its scan marker, once; False if it was already scanned."""
        now = self.registry._now()

        def work(conn: Connection) -> bool:
            t = s.subject_index_scans
            if conn.execute(select(t.c.manifest_hash).where(t.c.manifest_hash == manifest_hash)).first() is not None:
                return False
            conn.execute(insert(t).values(manifest_hash=manifest_hash, subject_column=subject_column, scanned_at=now))
            _insert_entries(conn, entries, now)
            return True

        return self.registry._retrying(work)

    def raw_scanned(self) -> set[str]:
        """Digests of the landed raw objects the subject index has scanned."""
        with self.registry._read() as conn:
            return set(conn.execute(select(s.subject_index_raw_scans.c.digest)).scalars())

    def record_raw_scan(self, digest: str, source: str, subject_column: str | None, entries: Sequence[IndexEntry]) -> bool:
        """Record one landed raw object's index entries with its scan marker, once; False if it was already scanned."""
        now = self.registry._now()

        def work(conn: Connection) -> bool:
            t = s.subject_index_raw_scans
            if conn.execute(select(t.c.digest).where(t.c.digest == digest)).first() is not None:
                return False
            conn.execute(insert(t).values(digest=digest, source=source, subject_column=subject_column, scanned_at=now))
            _insert_entries(conn, entries, now)
            return True

        return self.registry._retrying(work)

    def index_rows(self, subject_key_hash: str) -> list[Any]:
        t = s.subject_index
        with self.registry._read() as conn:
            return list(conn.execute(select(t).where(t.c.subject_key_hash == subject_key_hash).order_by(t.c.kind, t.c.descendant_id, t.c.manifest_hash)))

    def published_manifests(self) -> list[tuple[str, str, str, str]]:
        """``(manifest_hash, dataset, version, state)`` of every realization ever published, oldest first."""
        r, c = s.realizations, s.publication_claims
        with self.registry._read() as conn:
            rows = conn.execute(select(r.c.manifest_hash, r.c.dataset, r.c.version, r.c.state).join(c, c.c.realization_id == r.c.id).order_by(r.c.id))
            return [(row.manifest_hash, row.dataset, row.version, row.state) for row in rows]

    # ------------------------------------------------------------ the key of subject hashes

    def subject_key_id(self) -> str | None:
        """The id of the key the recorded subject hashes are keyed with (None: plain salted hashes, never keyed)."""
        t = st.registry_properties
        with self.registry._read() as conn:
            value = conn.execute(select(t.c.value).where(t.c.name == SUBJECT_KEY_PROPERTY)).scalar()
        return None if value is None else str(value)

    def adopt_subject_key(self, key_id: str, convert: Callable[[str], str], *, actor: str) -> str:
        """Key every recorded salted subject hash with ``convert`` and record ``key_id``, in one transaction, once; the recorded id."""
        now = self.registry._now()

        def work(conn: Connection) -> str:
            t = st.registry_properties
            stored = conn.execute(select(t.c.value).where(t.c.name == SUBJECT_KEY_PROPERTY)).scalar()
            if stored is not None:
                return str(stored)
            for table in (s.subject_index, s.privacy_requests):
                for old in set(conn.execute(select(table.c.subject_key_hash).distinct()).scalars()):
                    conn.execute(update(table).where(table.c.subject_key_hash == old).values(subject_key_hash=convert(str(old))))
            conn.execute(insert(t).values(name=SUBJECT_KEY_PROPERTY, value=key_id, recorded_by=actor, recorded_at=now))
            return key_id

        return self.registry._retrying(work)

    # ------------------------------------------------------------ requests and outcomes

    def begin_request(
        self, request_id: str, subject_key_hash: str, *, reason: str, actor: str, decisions: Sequence[Decision] = ()
    ) -> tuple[PrivacyRequest, bool]:
        """The request, created now with a new (strictly greater) redaction generation, or as recorded before; and whether it was created.

        ``decisions`` (the plan) are recorded with a new request, or with an old one that has no plan recorded yet.
        """
        now = self.registry._now()

        def work(conn: Connection) -> tuple[PrivacyRequest, bool]:
            t = s.privacy_requests
            row = conn.execute(select(t).where(t.c.request_id == request_id)).first()
            created = row is None
            if created:
                generation = q.current_generation(conn) + 1
                who = {"subject_key_hash": subject_key_hash, "generation": generation, "reason": reason, "actor": actor}
                conn.execute(insert(s.redaction_generations).values(**who, at=now))
                conn.execute(insert(t).values(request_id=request_id, **who, requested_at=now))
            planned = conn.execute(select(privacy_plans.c.request_id).where(privacy_plans.c.request_id == request_id)).first()
            if planned is None:
                doc = [{**d.to_document(), "encrypted": d.descendant.encrypted} for d in decisions]
                conn.execute(insert(privacy_plans).values(request_id=request_id, decisions_json=canonical_json.dumps(doc).decode(), recorded_at=now))
            return _request(conn.execute(select(t).where(t.c.request_id == request_id)).one()), created

        return self.registry._retrying(work)

    def planned(self, request_id: str) -> list[Decision]:
        """The decisions recorded with the request (empty for an unknown request)."""
        with self.registry._read() as conn:
            return _planned(conn, request_id)

    def complete_request(self, request_id: str) -> bool:
        """Mark the request completed; True if this call completed it.

        Refused (:class:`PrivacyIncompleteError`, nothing written) while a planned descendant has no recorded outcome.
        """
        t, o = s.privacy_requests, s.privacy_outcomes
        with self.registry._write() as conn:
            done = {(r.kind, r.descendant_id) for r in conn.execute(select(o.c.kind, o.c.descendant_id).where(o.c.request_id == request_id))}
            missing = [d for d in _planned(conn, request_id) if (d.descendant.kind.value, d.descendant.id) not in done]
            if missing:
                named = ", ".join(f"{d.descendant.kind.value} {d.descendant.id[:24]}" for d in missing[:3])
                raise PrivacyIncompleteError(
                    f"privacy request {request_id}: {len(missing)} planned descendant(s) have no recorded outcome ({named}); "
                    "rerun the deletion or `dsv privacy reconcile` to finish it"
                )
            result = conn.execute(update(t).where(t.c.request_id == request_id, t.c.completed_at.is_(None)).values(completed_at=self.registry._now()))
            return bool(result.rowcount)

    def requests(self, subject_key_hash: str | None = None) -> list[PrivacyRequest]:
        t = s.privacy_requests
        stmt = select(t).order_by(t.c.generation)
        if subject_key_hash is not None:
            stmt = stmt.where(t.c.subject_key_hash == subject_key_hash)
        with self.registry._read() as conn:
            return [_request(r) for r in conn.execute(stmt)]

    def deleted_subjects(self) -> set[str]:
        """Salted hashes of every subject a deletion was requested for (new realizations exclude them)."""
        with self.registry._read() as conn:
            return set(conn.execute(select(s.privacy_requests.c.subject_key_hash)).scalars())

    def record_outcome(self, request: PrivacyRequest, decision: Decision, detail: dict[str, Any]) -> bool:
        """Record the descendant's one outcome for this request; False (and nothing written) if it is already recorded."""
        now = self.registry._now()
        d = decision.descendant

        def work(conn: Connection) -> bool:
            t = s.privacy_outcomes
            found = conn.execute(
                select(t.c.id).where(t.c.request_id == request.request_id, t.c.kind == d.kind.value, t.c.descendant_id == d.id)
            ).first()
            if found is not None:
                return False
            conn.execute(
                insert(t).values(
                    request_id=request.request_id,
                    generation=request.generation,
                    kind=d.kind.value,
                    descendant_id=d.id,
                    outcome=decision.outcome.value,
                    legal_basis=decision.legal_basis,
                    detail_json=canonical_json.dumps(detail).decode(),
                    at=now,
                )
            )
            return True

        return self.registry._retrying(work)

    def outcomes(self, *, request_id: str | None = None, after_generation: int | None = None) -> list[dict[str, Any]]:
        t = s.privacy_outcomes
        stmt = select(t).order_by(t.c.generation, t.c.kind, t.c.descendant_id)
        if request_id is not None:
            stmt = stmt.where(t.c.request_id == request_id)
        if after_generation is not None:
            stmt = stmt.where(t.c.generation > after_generation)
        with self.registry._read() as conn:
            return [
                {
                    "request_id": r.request_id,
                    "generation": r.generation,
                    "kind": r.kind,
                    "id": r.descendant_id,
                    "outcome": r.outcome,
                    "legal_basis": r.legal_basis,
                    "detail": json.loads(r.detail_json),
                }
                for r in conn.execute(stmt)
            ]

    # ------------------------------------------------------------ governance

    def models_using(self, manifest_hashes: Iterable[str]) -> list[dict[str, Any]]:
        """Models trained on and artifacts produced from these realizations (lineage edges) and retention roots naming them, for the governance decision."""
        hashes = sorted(set(manifest_hashes))
        if not hashes:
            return []
        e, r = s.lineage_edges, s.retention_roots
        with self.registry._read() as conn:
            edges = conn.execute(
                select(e).where(e.c.src_kind == "realization", e.c.src_id.in_(hashes), e.c.dst_kind.in_(MODEL_KINDS)).order_by(e.c.dst_kind, e.c.dst_id)
            )
            found = [{"kind": row.dst_kind, "id": row.dst_id, "realization": row.src_id, "relation": row.relation} for row in edges]
            trained = {f"{f['kind']}:{f['id']}": f["realization"] for f in found}  # roots on a model run (model_run:<hash>)
            for row in conn.execute(select(r).where(r.c.released_at.is_(None)).order_by(r.c.id)):
                for h in hashes:
                    if h in row.ref or trained.get(row.ref) == h:
                        found.append({"kind": f"retention_root:{row.kind}", "id": row.ref, "realization": h, "relation": "retains", "owner": row.owner})
        return found


__all__ = ["IndexEntry", "PrivacyIncompleteError", "PrivacyRecords", "PrivacyRequest", "privacy_plans"]
