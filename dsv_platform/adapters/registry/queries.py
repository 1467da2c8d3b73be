"""Row access shared by the registry's operations; every function runs inside the caller's transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import CursorResult, Row, func, insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.signed_events import sign_state
from dsv_platform.core.errors import DsvError, NotFoundError
from dsv_platform.core.publication.records import Definition, Realization, RealizationEvent
from dsv_platform.core.publication.states import ConcurrentTransitionError, RealizationState, check_transition


def realization_from_row(row: Row[Any]) -> Realization:
    m = row._mapping
    return Realization(
        id=m["id"],
        dataset=m["dataset"],
        version=m["version"],
        state=RealizationState(m["state"]),
        request_id=m["request_id"],
        logical_key=m["logical_key"],
        manifest_hash=m["manifest_hash"],
        content_hash=m["content_hash"],
        schema_hash=m["schema_hash"],
        human_version=m["human_version"],
        created_at=m["created_at"],
        created_by=m["created_by"],
        state_changed_at=m["state_changed_at"],
        published_at=m["published_at"],
        redaction_generation=m["redaction_generation"],
    )


def event_from_row(row: Row[Any]) -> RealizationEvent:
    m = row._mapping
    return RealizationEvent(
        id=m["id"],
        realization_id=m["realization_id"],
        from_state=None if m["from_state"] is None else RealizationState(m["from_state"]),
        to_state=RealizationState(m["to_state"]),
        reason=m["reason"],
        actor=m["actor"],
        at=m["at"],
    )


def definition_from_row(row: Row[Any]) -> Definition:
    m = row._mapping
    return Definition(
        name=m["name"],
        version=m["version"],
        contract_json=m["contract_json"],
        contract_hash=m["contract_hash"],
        recipe_json=m["recipe_json"],
        recipe_hash=m["recipe_hash"],
        owner=m["owner"],
        created_at=m["created_at"],
        allowed_readers=tuple(json.loads(m["allowed_readers_json"])),
    )


def find_realization(conn: Connection, realization_id: int) -> Realization | None:
    row = conn.execute(select(s.realizations).where(s.realizations.c.id == realization_id)).first()
    return None if row is None else realization_from_row(row)


def load_realization(conn: Connection, realization_id: int) -> Realization:
    found = find_realization(conn, realization_id)
    if found is None:
        raise NotFoundError(f"no realization with id {realization_id}", detail={"realization_id": realization_id})
    return found


def find_definition(conn: Connection, name: str, version: str) -> Definition | None:
    t = s.dataset_definitions
    row = conn.execute(select(t).where(t.c.name == name, t.c.version == version)).first()
    return None if row is None else definition_from_row(row)


def inserted_id(result: CursorResult[Any]) -> int:
    """The integer primary key a single-row INSERT created."""
    key = result.inserted_primary_key
    if key is None:
        raise DsvError("the INSERT returned no primary key")
    return int(key[0])


def current_generation(conn: Connection) -> int:
    """The current redaction generation (0 before any deletion)."""
    return int(conn.execute(select(func.max(s.redaction_generations.c.generation))).scalar() or 0)


def find_claim(conn: Connection, **where: Any) -> Row[Any] | None:
    """The publication claim matching every ``column=value`` given (at most one by the unique constraints)."""
    t = s.publication_claims
    return conn.execute(select(t).where(*(t.c[k] == v for k, v in where.items()))).first()


def add_event(conn: Connection, realization_id: int, old: RealizationState | None, new: RealizationState, reason: str, actor: str, at: datetime) -> None:
    """Append the event; the engine's signer (the proven identity) signs it in this transaction (signed_events.py)."""
    conn.execute(
        insert(s.realization_events).values(
            realization_id=realization_id,
            from_state=None if old is None else old.value,
            to_state=new.value,
            reason=reason,
            actor=actor,
            at=at,
        )
    )
    sign_state(conn, realization_id, at)


def set_state(
    conn: Connection,
    current: Realization,
    new: RealizationState,
    *,
    reason: str,
    actor: str,
    at: datetime,
    **values: Any,
) -> Realization:
    """Move ``current`` to ``new`` guarded by its state (UPDATE ... WHERE state = old) and append the event.

    Raises :class:`IllegalTransitionError` for a forbidden move and
    :class:`ConcurrentTransitionError` when the row's state changed since it was read.
    """
    check_transition(current.state, new)
    t = s.realizations
    result = conn.execute(
        update(t)
        .where(t.c.id == current.id, t.c.state == current.state.value)
        .values(state=new.value, state_changed_at=at, **values)
    )
    if result.rowcount != 1:
        raise ConcurrentTransitionError(
            f"realization {current.id} changed concurrently: expected state {current.state.value} for {current.state.value} -> {new.value}; re-read it"
        )
    add_event(conn, current.id, current.state, new, reason, actor, at)
    return load_realization(conn, current.id)
