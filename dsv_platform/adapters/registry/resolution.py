"""Resolution: a reference answers with one readable realization or a typed failure.

Never a near miss: NOT_FOUND, ACCESS_DENIED, REDACTED, EXPIRED or QUARANTINED (CORRUPT is the
reader's call), and ``name:version`` alone means the newest readable realization. The state and the
alias returned are checked against their signed events: UNTRUSTED when none backs them.

Details: docs/publication.md
"""

from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import aliases as al
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.signed_events import verify_alias, verify_state
from dsv_platform.core.errors import AccessDeniedError, ExpiredError, NotFoundError, QuarantinedError, RedactedError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState, is_readable

S = RealizationState


def readable_or_raise(r: Realization, ref: str) -> Realization:
    if is_readable(r.state):
        return r
    detail: dict[str, object] = {"state": r.state.value, "realization_id": r.id, "manifest_hash": r.manifest_hash}
    if r.state is S.REDACTED:
        detail["redaction_generation"] = r.redaction_generation
        raise RedactedError(f"{ref} was redacted (generation {r.redaction_generation})", ref=ref, detail=detail)
    if r.state is S.EXPIRED:
        raise ExpiredError(f"{ref} has expired and its data may be gone", ref=ref, detail=detail)
    if r.state is S.QUARANTINED:
        raise QuarantinedError(f"{ref} is quarantined pending review (dsv status lists the quarantine and its reason)", ref=ref, detail=detail)
    raise NotFoundError(f"{ref} is {r.state.value}, not published", ref=ref, detail=detail)


def trusted(conn: Connection, realization: Realization, ref: str) -> Realization:
    """``realization`` once its state is backed by its newest signed event (signed_events.py), else UntrustedError."""
    verify_state(conn, realization, ref)
    return realization


def published(conn: Connection, name: str, version: str) -> list[Realization]:
    """Every realization of name:version that was ever published, newest publication first."""
    r, c = s.realizations, s.publication_claims
    rows = conn.execute(
        select(r).join(c, c.c.realization_id == r.c.id).where(c.c.dataset == name, c.c.version == version).order_by(c.c.claimed_at.desc(), r.c.id.desc())
    )
    return [q.realization_from_row(row) for row in rows]


def resolve(conn: Connection, name: str, version: str, manifest_hash: str | None, alias: str | None, actor: str | None) -> Realization:
    base = f"{name}:{version}"
    ref = f"{base}@sha256:{manifest_hash}" if manifest_hash else (f"{base}@{alias}" if alias else base)
    definition = q.find_definition(conn, name, version)
    if definition is None:
        raise NotFoundError(f"no dataset definition {base} in the registry (its first build registers it: dsv build {base})", ref=ref)
    readers = definition.allowed_readers
    if readers and actor not in readers:
        raise AccessDeniedError(f"{actor or 'an anonymous reader'} may not read {base}", ref=ref, detail={"actor": actor})
    if alias is not None:
        pointer = al.get_alias(conn, name, version, alias)
        if pointer is None:
            raise NotFoundError(f"no alias {alias!r} on {base}", ref=ref)
        verify_alias(conn, pointer, ref)  # the row is its newest move, signed by a publisher
        if manifest_hash is not None and manifest_hash != pointer.target:
            raise NotFoundError(f"alias {alias!r} points to {pointer.target}, not {manifest_hash}", ref=ref, detail={"alias_target": pointer.target})
        manifest_hash = pointer.target
    if manifest_hash is not None:
        claim = q.find_claim(conn, dataset=name, version=version, manifest_hash=manifest_hash)
        if claim is None:
            raise NotFoundError(f"no published realization of {base} has manifest {manifest_hash}", ref=ref)
        return trusted(conn, readable_or_raise(q.load_realization(conn, claim.realization_id), ref), ref)
    candidates = published(conn, name, version)
    for realization in candidates:
        if is_readable(realization.state):
            return trusted(conn, realization, ref)
        verify_state(conn, realization, ref, signature=False)  # a newer one skipped: its state is the one its events say
    if candidates:
        return readable_or_raise(candidates[0], ref)
    raise NotFoundError(f"{base} has no published realization", ref=ref)


def allowed_readers_json(readers: tuple[str, ...] | list[str]) -> str:
    return json.dumps(sorted(set(readers)))
