"""Aliases: moving pointers, moved by compare-and-swap, only to published realizations, with history.

``set_alias(..., expect=None)`` creates the alias and fails if it exists;
``expect=<hash>`` moves it only if it still points there. The CAS is one
conditional statement (INSERT ... ON CONFLICT DO NOTHING, or UPDATE ... WHERE
target = expect), checked by its row count, in the same transaction as the
history row, so no move is lost and history has no gaps. A protected alias moves
only to an ELIGIBLE target, its state re-read share-locked in that transaction (approval.py).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.approval import audit_in, locked_state
from dsv_platform.adapters.registry.publication import insert_ignore
from dsv_platform.adapters.registry.quarantine import quarantine_note
from dsv_platform.adapters.registry.signed_events import sign_alias, signers, verify_state
from dsv_platform.core.errors import NotFoundError, PublicationError, QuarantinedError
from dsv_platform.core.publication.approval import DEFAULT_PROTECTED_ALIASES, check_protected_target
from dsv_platform.core.publication.records import AliasMove, AliasRecord, StaleAliasError
from dsv_platform.core.publication.states import RealizationState, alias_targetable

A = s.aliases
H = s.alias_history


def _record(row: Row[Any]) -> AliasRecord:
    m = row._mapping
    return AliasRecord(
        dataset=m["dataset"],
        version=m["version"],
        alias=m["alias"],
        target=m["target_manifest_hash"],
        generation=m["generation"],
        updated_at=m["updated_at"],
        updated_by=m["updated_by"],
    )


def get_alias(conn: Connection, name: str, version: str, alias: str) -> AliasRecord | None:
    row = conn.execute(select(A).where(A.c.dataset == name, A.c.version == version, A.c.alias == alias)).first()
    return None if row is None else _record(row)


def alias_history(conn: Connection, name: str, version: str, alias: str) -> list[AliasMove]:
    """The moves of ``name:version@alias``, oldest first; a signed move's actor is its signer, not the free-text column."""
    rows = list(conn.execute(select(H).where(H.c.dataset == name, H.c.version == version, H.c.alias == alias).order_by(H.c.generation, H.c.id)))
    signed = signers(conn, "alias", [int(r.id) for r in rows])
    return [
        AliasMove(
            dataset=r.dataset,
            version=r.version,
            alias=r.alias,
            old_target=r.old_target,
            new_target=r.new_target,
            generation=r.generation,
            actor=signed.get(int(r.id), r.actor),
            reason=r.reason,
            at=r.at,
        )
        for r in rows
    ]


def set_alias(
    conn: Connection,
    name: str,
    version: str,
    alias: str,
    target: str,
    *,
    expect: str | None,
    actor: str,
    reason: str,
    now: datetime,
    protected: Collection[str] = DEFAULT_PROTECTED_ALIASES,
    audit_as: str | None = None,  # the moving identity: its alias.move audit entry is written in this transaction
) -> AliasRecord:
    ref = f"{name}:{version}@sha256:{target}"
    state = locked_state(conn, name, version, target)  # re-read inside this transaction, row share-locked (approval.py)
    if state is None:
        raise NotFoundError(f"alias {alias!r} cannot point to {ref}: no such published realization", ref=ref)
    if state is RealizationState.QUARANTINED:
        note = quarantine_note(conn, target)
        raise QuarantinedError(f"alias {name}:{version}@{alias} cannot move to {ref}: it is quarantined{note}", ref=ref, detail={"alias": alias})
    if not alias_targetable(state):
        raise PublicationError(f"alias {alias!r} may point only to PUBLISHED or ELIGIBLE realizations; {ref} is {state.value}")
    check_protected_target(alias, ref, state, protected)
    claim = q.find_claim(conn, dataset=name, version=version, manifest_hash=target)
    if claim is not None:  # found with the state above: the state it moves on must be the one its signed events say
        verify_state(conn, q.load_realization(conn, claim.realization_id), ref)
    where = (A.c.dataset == name, A.c.version == version, A.c.alias == alias)
    if expect is None:
        moved = insert_ignore(
            conn, A, dataset=name, version=version, alias=alias, target_manifest_hash=target, generation=1, updated_at=now, updated_by=actor
        )
    else:
        result = conn.execute(
            update(A)
            .where(*where, A.c.target_manifest_hash == expect)
            .values(target_manifest_hash=target, generation=A.c.generation + 1, updated_at=now, updated_by=actor)
        )
        moved = result.rowcount == 1
    current = get_alias(conn, name, version, alias)
    if not moved or current is None:
        actual = None if current is None else current.target
        raise StaleAliasError(
            f"alias {name}:{version}@{alias} was expected to point to {expect or '(nothing: create)'} but points to {actual or '(nothing)'}; "
            "re-read it and decide again",
            actual=actual,
            generation=None if current is None else current.generation,
        )
    move = {"old_target": expect, "new_target": target, "generation": current.generation, "actor": actor, "reason": reason, "at": now}
    conn.execute(insert(H).values(dataset=name, version=version, alias=alias, **move))
    sign_alias(conn, name, version, alias, now)  # signed by the moving identity (signed_events.py)
    audit_in(conn, audit_as, "alias.move", f"{name}:{version}@{alias}", reason=reason or None, now=now, detail={"from": expect, "to": target})
    return current
