"""Candidates, sealing and publication (docs/architecture.md, "Publication is a transaction").

Each function runs inside one write transaction opened by :class:`Registry`. Publication is
one conditional insert whose unique constraints make exactly one winner; every racing or
retrying builder ends with the same answer (CREATED, REPLAYED, SAME_MANIFEST or LOST_RACE).

Details: docs/publication.md
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import collection
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.core.errors import CorruptError, IllegalTransitionError, NotFoundError, PublicationError
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import PublishOutcome, PublishResult, Realization
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.gc_graph import named_digests

S = RealizationState


def insert_ignore(conn: Connection, table: Any, **values: Any) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING; True when the row was inserted."""
    # The backend's own dialect module, imported here: loading sqlalchemy's postgresql dialect costs start-up on SQLite.
    dialect = importlib.import_module(f"sqlalchemy.dialects.{'postgresql' if conn.dialect.name == 'postgresql' else 'sqlite'}")
    result = conn.execute(dialect.insert(table).values(**values).on_conflict_do_nothing())
    return bool(result.rowcount == 1)


def create_candidate(conn: Connection, *, name: str, version: str, request_id: str, logical_key: str, actor: str, now: datetime) -> int:
    existing = conn.execute(select(s.realizations).where(s.realizations.c.request_id == request_id)).first()
    if existing is not None:
        found = q.realization_from_row(existing)
        if (found.dataset, found.version, found.logical_key) != (name, version, logical_key):
            raise PublicationError(
                f"request id {request_id!r} already created candidate {found.id} for {found.dataset}:{found.version} "
                f"(logical key {found.logical_key!r}); use a new request id"
            )
        return found.id
    if q.find_definition(conn, name, version) is None:
        raise NotFoundError(f"no dataset definition {name}:{version}; register it first", ref=f"{name}:{version}")
    result = conn.execute(
        insert(s.realizations).values(
            dataset=name,
            version=version,
            state=S.STAGING.value,
            request_id=request_id,
            logical_key=logical_key,
            created_at=now,
            created_by=actor,
            state_changed_at=now,
        )
    )
    (rid,) = result.inserted_primary_key or (None,)
    if rid is None:  # pragma: no cover - both backends return the key
        raise PublicationError("the registry did not return the new candidate's id")
    q.add_event(conn, int(rid), None, S.STAGING, f"candidate created (request {request_id})", actor, now)
    return int(rid)


def _as_manifest(manifest: Manifest | Mapping[str, Any] | str | bytes) -> Manifest:
    if isinstance(manifest, Manifest):
        return manifest
    if isinstance(manifest, (str, bytes)):
        return Manifest.from_json(manifest)
    return Manifest.from_document(manifest)


def seal(conn: Connection, realization_id: int, manifest_in: Manifest | Mapping[str, Any] | str | bytes, *, actor: str, now: datetime) -> Realization:
    """STAGING -> SEALED, storing the manifest; sealing again with the same manifest is a no-op."""
    manifest = _as_manifest(manifest_in)
    current = q.load_realization(conn, realization_id)
    if (manifest.dataset, manifest.version) != (current.dataset, current.version):
        raise PublicationError(
            f"manifest is for {manifest.dataset}:{manifest.version} but candidate {realization_id} is {current.dataset}:{current.version}"
        )
    digest = manifest.manifest_hash
    if current.manifest_hash is not None:
        if current.manifest_hash == digest:
            return current
        raise IllegalTransitionError(f"candidate {realization_id} is already sealed with manifest {current.manifest_hash}, not {digest}")
    text = manifest.canonical_bytes().decode("utf-8")
    if not insert_ignore(conn, s.manifests, manifest_hash=digest, dataset=manifest.dataset, version=manifest.version, canonical_json=text, stored_at=now):
        stored = conn.execute(select(s.manifests.c.canonical_json).where(s.manifests.c.manifest_hash == digest)).scalar_one()
        if stored != text:
            raise CorruptError(f"stored manifest {digest} does not match its hash; restore it from backup", detail={"manifest_hash": digest})
    return q.set_state(
        conn,
        current,
        S.SEALED,
        reason=f"sealed with manifest {digest}",
        actor=actor,
        at=now,
        manifest_hash=digest,
        content_hash=manifest.content_hash,
        schema_hash=manifest.schema_hash,
    )


def _digests_named(manifest_json: str) -> list[str]:
    """Every digest a stored manifest names (its objects among them)."""
    return sorted(set(named_digests(json.loads(manifest_json))))


def _next_human_version(conn: Connection, name: str, version: str, now: datetime) -> str:
    day = now.date().isoformat()
    t = s.publication_claims
    taken = conn.execute(select(t.c.human_version).where(t.c.dataset == name, t.c.version == version, t.c.human_version.like(f"{day}.%"))).scalars()
    highest = max((int(h.rsplit(".", 1)[1]) for h in taken), default=0)
    return f"{day}.{highest + 1}"


def _abandon(conn: Connection, candidate: Realization, winner: Realization, why: str, actor: str, now: datetime) -> None:
    if candidate.state in (S.STAGING, S.SEALED):
        q.set_state(conn, candidate, S.ABANDONED, reason=f"{why}: realization {winner.id} ({winner.manifest_hash}) is published", actor=actor, at=now)


def publish(conn: Connection, realization_id: int, request_id: str, *, actor: str | None, now: datetime) -> PublishOutcome:
    collection.lock(conn, shared=True)  # serialized with GC batches: none may be deleting an object this manifest names (collection.py)
    candidate = q.load_realization(conn, realization_id)
    if candidate.manifest_hash is not None:
        stored = conn.execute(select(s.manifests.c.canonical_json).where(s.manifests.c.manifest_hash == candidate.manifest_hash)).scalar()
        if stored is not None:
            collection.refuse_collected(conn, _digests_named(str(stored)), what=f"realization {realization_id}")
    who = actor or candidate.created_by
    by_request = q.find_claim(conn, request_id=request_id)
    if by_request is not None:
        if by_request.realization_id != realization_id:
            raise PublicationError(
                f"request id {request_id!r} already published realization {by_request.realization_id}, not {realization_id}; use a new request id"
            )
        return PublishOutcome(candidate, False, PublishResult.REPLAYED, realization_id)
    if q.find_claim(conn, realization_id=realization_id) is not None:
        return PublishOutcome(candidate, False, PublishResult.REPLAYED, realization_id)
    if candidate.manifest_hash is None:
        raise IllegalTransitionError(f"realization {realization_id} is {candidate.state.value}: seal it with a manifest before publishing")
    key = {"dataset": candidate.dataset, "version": candidate.version}
    same = q.find_claim(conn, manifest_hash=candidate.manifest_hash, **key)
    if same is not None:
        winner = q.load_realization(conn, same.realization_id)
        _abandon(conn, candidate, winner, "same manifest already published", who, now)
        return PublishOutcome(winner, False, PublishResult.SAME_MANIFEST, realization_id)
    taken = q.find_claim(conn, logical_key=candidate.logical_key, **key)
    if taken is not None:
        winner = q.load_realization(conn, taken.realization_id)
        if winner.manifest_hash == candidate.manifest_hash:  # committed between our two reads: the same manifest won
            _abandon(conn, candidate, winner, "same manifest already published", who, now)
            return PublishOutcome(winner, False, PublishResult.SAME_MANIFEST, realization_id)
        _abandon(conn, candidate, winner, f"lost the logical key {candidate.logical_key!r}", who, now)
        return PublishOutcome(winner, False, PublishResult.LOST_RACE, realization_id)
    if candidate.state not in (S.SEALED, S.QUARANTINED):
        raise IllegalTransitionError(f"realization {realization_id} is {candidate.state.value} and cannot be published")
    human = _next_human_version(conn, candidate.dataset, candidate.version, now)
    conn.execute(
        insert(s.publication_claims).values(
            realization_id=realization_id,
            logical_key=candidate.logical_key,
            manifest_hash=candidate.manifest_hash,
            human_version=human,
            request_id=request_id,
            claimed_at=now,
            **key,
        )
    )
    published = q.set_state(
        conn,
        candidate,
        S.PUBLISHED,
        reason=json.dumps({"published_as": human, "request_id": request_id}, sort_keys=True),
        actor=who,
        at=now,
        human_version=human,
        published_at=now,
    )
    return PublishOutcome(published, True, PublishResult.CREATED, realization_id)
