"""Operator quarantines in the registry (migration 8): the record with its evidence, the states it moves, two-person release.

A quarantine, the QUARANTINED state of every realization it covers and its audit entry are
written in one transaction; so is each release step with its audit entry, and an approval with
the return of those realizations to PUBLISHED (unless another active quarantine still covers
them). Release requests and approvals are append-only rows. Details: docs/quarantine.md
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.transactions import RegistryTransactions
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import AccessDeniedError, DsvError, FailureKind, NotFoundError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState, is_legal

T, R = s.quarantines, s.quarantine_releases
ACTIVE, RELEASE_PENDING, RELEASED = "ACTIVE", "RELEASE_PENDING", "RELEASED"
S = RealizationState


class QuarantineStateError(DsvError):
    """A quarantine or release step that the quarantine's state does not allow (already quarantined, no pending request, already released)."""

    kind = FailureKind.QUARANTINE_STATE


@dataclass(frozen=True)
class QuarantineRecord:
    id: int
    kind: str
    target: str
    ref: str
    reason: str
    evidence: Mapping[str, Any]
    affected: tuple[Mapping[str, Any], ...]
    created_by: str
    created_at: datetime
    state: str
    released_at: datetime | None
    releases: tuple[Mapping[str, Any], ...] = ()

    @property
    def active(self) -> bool:
        return self.state != RELEASED

    def covers(self, manifest_hash: str) -> bool:
        """Whether this quarantine holds the realization ``manifest_hash`` (its target or a quarantined descendant)."""
        if self.kind == "realization" and self.target == manifest_hash:
            return True
        return any(a.get("kind") == "realization" and a.get("id") == manifest_hash and a.get("quarantined") for a in self.affected)

    def to_document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": self.target,
            "ref": self.ref,
            "reason": self.reason,
            "state": self.state,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "released_at": None if self.released_at is None else self.released_at.isoformat(),
            "evidence": dict(self.evidence),
            "affected": [dict(a) for a in self.affected],
            "releases": [dict(r) for r in self.releases],
        }


def _releases(conn: Connection, quarantine_id: int) -> tuple[dict[str, Any], ...]:
    rows = conn.execute(select(R).where(R.c.quarantine_id == quarantine_id).order_by(R.c.id))
    return tuple({"action": r.action, "identity": r.identity, "reason": r.reason, "at": r.at.isoformat()} for r in rows)


def _record(conn: Connection, row: Row[Any]) -> QuarantineRecord:
    m = row._mapping
    return QuarantineRecord(
        id=m["id"],
        kind=m["kind"],
        target=m["target"],
        ref=m["ref"],
        reason=m["reason"],
        evidence=json.loads(m["evidence_json"]),
        affected=tuple(json.loads(m["affected_json"])),
        created_by=m["created_by"],
        created_at=m["created_at"],
        state=m["state"],
        released_at=m["released_at"],
        releases=_releases(conn, m["id"]),
    )


def _audit(conn: Connection, now: datetime, *, identity: str, action: str, target: str, reason: str, detail: Mapping[str, Any]) -> None:
    """The audit entry of a quarantine step, in the step's transaction."""
    from dsv_platform.adapters.registry.trust import append_audit  # here: trust.py imports registry.py, which imports this module

    append_audit(conn, now=now, identity=identity, action=action, target=target, reason=reason, detail=detail)


def _realization_of(conn: Connection, manifest_hash: str) -> Realization | None:
    """The published realization with this manifest, else the newest candidate sealed with it."""
    claim = q.find_claim(conn, manifest_hash=manifest_hash)
    if claim is not None:
        return q.load_realization(conn, claim.realization_id)
    t = s.realizations
    row = conn.execute(select(t).where(t.c.manifest_hash == manifest_hash).order_by(t.c.id.desc())).first()
    return None if row is None else q.realization_from_row(row)


def _quarantine_realizations(conn: Connection, affected: Sequence[dict[str, Any]], *, reason: str, actor: str, now: datetime) -> list[dict[str, Any]]:
    """Move every affected realization that may be quarantined to QUARANTINED; each entry says what happened."""
    out = []
    for entry in affected:
        entry = dict(entry)
        if entry.get("kind") == "realization":
            current = _realization_of(conn, str(entry["id"]))
            if current is not None:
                entry["state_before"] = current.state.value
                entry["ref"] = current.ref
                if current.state is S.QUARANTINED:
                    entry["quarantined"] = True
                elif is_legal(current.state, S.QUARANTINED):
                    q.set_state(conn, current, S.QUARANTINED, reason=reason, actor=actor, at=now)
                    entry["quarantined"] = True
                else:
                    entry["quarantined"] = False
        out.append(entry)
    return out


def holding(conn: Connection, manifest_hash: str) -> list[QuarantineRecord]:
    """The active quarantines holding the realization ``manifest_hash``, oldest first."""
    rows = conn.execute(select(T).where(T.c.state != RELEASED).order_by(T.c.id))
    return [r for r in (_record(conn, row) for row in rows) if r.covers(manifest_hash)]


def quarantine_note(conn: Connection, manifest_hash: str) -> str:
    """`` (quarantine #3 of raw:src/b1 by op-a: reason)`` for messages; empty when no record holds it (the integrity scan's)."""
    held = holding(conn, manifest_hash)
    return "".join(f" (quarantine #{r.id} of {r.ref} by {r.created_by}: {r.reason})" for r in held[-1:])


class QuarantineRecords(RegistryTransactions):
    """The quarantine records of one registry (build it on ``registry.engine``)."""

    def create(
        self, kind: str, target: str, ref: str, *, reason: str, actor: str, evidence: Mapping[str, Any], affected: Sequence[dict[str, Any]]
    ) -> QuarantineRecord:
        """Record a quarantine and quarantine every realization in ``affected`` (``{"kind", "id", ...}`` entries), in one transaction."""

        def work(conn: Connection) -> QuarantineRecord:
            now = self._now()
            done = _quarantine_realizations(conn, affected, reason=f"quarantine of {ref}: {reason}", actor=actor, now=now)
            values = {
                "kind": kind,
                "target": target,
                "ref": ref,
                "reason": reason,
                "evidence_json": canonical_json.dumps(dict(evidence)).decode(),
                "affected_json": canonical_json.dumps(done).decode(),
                "created_by": actor,
                "created_at": now,
                "state": ACTIVE,
            }
            new_id = int(conn.execute(insert(T).values(**values)).inserted_primary_key[0])  # type: ignore[index]
            held = [str(a["node"]) for a in done if a.get("quarantined")]
            detail = {"quarantine": new_id, "kind": kind, "quarantined": held, "descendants": len(done)}
            _audit(conn, now, identity=actor, action="quarantine", target=ref, reason=reason, detail=detail)
            return self._load(conn, new_id)

        return self._retrying(work)

    def _load(self, conn: Connection, quarantine_id: int) -> QuarantineRecord:
        row = conn.execute(select(T).where(T.c.id == quarantine_id)).first()
        if row is None:
            raise NotFoundError(f"no quarantine #{quarantine_id}", ref=f"quarantine:{quarantine_id}")
        return _record(conn, row)

    def get(self, quarantine_id: int) -> QuarantineRecord:
        with self._read() as conn:
            return self._load(conn, quarantine_id)

    def records(self, *, kind: str | None = None, target: str | None = None, active_only: bool = False) -> list[QuarantineRecord]:
        """Quarantine records, oldest first: all, of one kind or target, or only those not released."""
        stmt = select(T).order_by(T.c.id)
        if kind is not None:
            stmt = stmt.where(T.c.kind == kind)
        if target is not None:
            stmt = stmt.where(T.c.target == target)
        if active_only:
            stmt = stmt.where(T.c.state != RELEASED)
        with self._read() as conn:
            return [_record(conn, row) for row in conn.execute(stmt)]

    def quarantined_batches(self) -> dict[str, int]:
        """``{batch ref: quarantine id}`` of every raw batch an active quarantine holds (canonical loading skips them)."""
        held: dict[str, int] = {}
        for record in self.records(kind="raw_batch", active_only=True):
            for ref in record.evidence.get("batch_refs", ()):
                held.setdefault(str(ref), record.id)
        return held

    def request_release(self, quarantine_id: int, *, identity: str, reason: str) -> QuarantineRecord:
        """ACTIVE -> RELEASE_PENDING: the first of the two identities a release needs."""

        def work(conn: Connection) -> QuarantineRecord:
            record = self._load(conn, quarantine_id)
            if record.state != ACTIVE:
                raise QuarantineStateError(f"quarantine #{record.id} of {record.ref} is {record.state}: a release can be requested only while ACTIVE")
            guarded = conn.execute(update(T).where(T.c.id == record.id, T.c.state == ACTIVE).values(state=RELEASE_PENDING))
            if guarded.rowcount != 1:
                raise QuarantineStateError(f"quarantine #{record.id} changed concurrently; re-read it")
            now = self._now()
            conn.execute(insert(R).values(quarantine_id=record.id, action="request", identity=identity, reason=reason, at=now))
            _audit(conn, now, identity=identity, action="release", target=record.ref, reason=reason, detail={"quarantine": record.id, "step": "requested"})
            return self._load(conn, record.id)

        return self._retrying(work)

    def approve_release(self, quarantine_id: int, *, identity: str, reason: str) -> tuple[QuarantineRecord, list[str]]:
        """RELEASE_PENDING -> RELEASED by a second identity; returns the record and the realizations back to PUBLISHED.

        The identity that requested the release is refused (AccessDeniedError). A realization
        another active quarantine still covers stays QUARANTINED.
        """

        def work(conn: Connection) -> tuple[QuarantineRecord, list[str]]:
            record = self._load(conn, quarantine_id)
            if record.state != RELEASE_PENDING:
                raise QuarantineStateError(f"quarantine #{record.id} of {record.ref} is {record.state}: nothing to approve (request a release first)")
            requester = next(r["identity"] for r in reversed(record.releases) if r["action"] == "request")
            if requester == identity:
                raise AccessDeniedError(
                    f"identity {identity!r} requested the release of quarantine #{record.id} ({record.ref}); a second identity must approve it",
                    ref=record.ref,
                    detail={"identity": identity, "role": "operator", "quarantine": record.id},
                )
            now = self._now()
            conn.execute(update(T).where(T.c.id == record.id, T.c.state == RELEASE_PENDING).values(state=RELEASED, released_at=now))
            conn.execute(insert(R).values(quarantine_id=record.id, action="approve", identity=identity, reason=reason, at=now))
            others = [_record(conn, row) for row in conn.execute(select(T).where(T.c.state != RELEASED, T.c.id != record.id))]
            released = []
            for mh in _held_by(record):
                if any(o.covers(mh) for o in others):
                    continue
                current = _realization_of(conn, mh)
                if current is not None and current.state is S.QUARANTINED and q.find_claim(conn, realization_id=current.id) is not None:
                    q.set_state(conn, current, S.PUBLISHED, reason=f"released from quarantine #{record.id}: {reason}", actor=identity, at=now)
                    released.append(current.ref)
            detail = {"quarantine": record.id, "released": released}
            _audit(conn, now, identity=identity, action="release.approve", target=record.ref, reason=reason, detail=detail)
            return self._load(conn, record.id), released

        return self._retrying(work)


def _held_by(record: QuarantineRecord) -> list[str]:
    """The manifest hashes of the realizations ``record`` quarantined."""
    held = [record.target] if record.kind == "realization" else []
    held += [str(a["id"]) for a in record.affected if a.get("kind") == "realization" and a.get("quarantined") and a["id"] not in held]
    return held
