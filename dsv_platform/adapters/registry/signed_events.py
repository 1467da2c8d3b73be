"""Signed state transitions and alias moves (migration 14), written and checked inside the registry's transactions.

Every realization event and alias move a process with a proven identity writes is signed, in the same transaction,
by that identity (:class:`TrustPolicy` of the engine: the services set the signer once the key is proven). The
signature covers the newest event, the chain of every earlier event of its subject, and the realization's manifest
hash. Resolution calls :func:`verify_state` and :func:`verify_alias`: a state or an alias that no valid signature
backs is UNTRUSTED naming the event. Details: docs/trust.md ("Signed state and aliases").
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, insert, select
from sqlalchemy.engine import Connection, Engine

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.certificates import chain, verified_grants, verified_key, verifies
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.publication.records import AliasRecord, Realization
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of
from dsv_platform.core.trust.trust import Role, grant_covers

STATE_FROM, ALIAS_FROM = "signed_state_from", "signed_alias_from"
"""Registry properties: the first event id signed of each kind; every later one must be signed too."""


@dataclass(frozen=True)
class EventSigner:
    """The identity a process proved: its name, raw Ed25519 public key and its signing function."""

    identity: str
    public_key: bytes
    sign: Callable[[bytes], bytes]


@dataclass
class TrustPolicy:
    """What one engine's transactions sign with and require: set by the services (docs/trust.md)."""

    signer: EventSigner | None = None
    root: bytes | None = None  # the pinned trust root public key: keys and grants must chain to it


_POLICIES: weakref.WeakKeyDictionary[Engine, TrustPolicy] = weakref.WeakKeyDictionary()


def policy_of(engine: Engine) -> TrustPolicy:
    return _POLICIES.setdefault(engine, TrustPolicy())


def pin_root(engine: Engine, root: bytes | None) -> None:
    """Pin the trust root outside the registry: identity keys and grants (and so every signer) must chain to it."""
    policy_of(engine).root = root


def _property(conn: Connection, name: str) -> str | None:
    p = st.registry_properties
    value = conn.execute(select(p.c.value).where(p.c.name == name)).scalar()
    return None if value is None else str(value)


# ---------------------------------------------------------------- statements


def _state_rows(conn: Connection, realization_id: int) -> list[Row[Any]]:
    t = s.realization_events
    return list(conn.execute(select(t).where(t.c.realization_id == realization_id).order_by(t.c.id)))


def _state_fields(row: Row[Any]) -> dict[str, Any]:
    return {"id": int(row.id), "from": row.from_state, "to": row.to_state, "reason": row.reason, "actor": row.actor, "at": ev.moment(row.at)}


def _alias_rows(conn: Connection, name: str, version: str, alias: str) -> list[Row[Any]]:
    h = s.alias_history
    return list(conn.execute(select(h).where(h.c.dataset == name, h.c.version == version, h.c.alias == alias).order_by(h.c.generation, h.c.id)))


def _alias_fields(row: Row[Any]) -> dict[str, Any]:
    return {
        "id": int(row.id),
        "old": row.old_target,
        "new": row.new_target,
        "generation": int(row.generation),
        "actor": row.actor,
        "reason": row.reason,
        "at": ev.moment(row.at),
    }


def _statement(kind: str, subject: dict[str, Any], rows: list[Row[Any]]) -> bytes:
    fields = _state_fields if kind == ev.STATE else _alias_fields
    return ev.event_statement(kind, subject, fields(rows[-1]), ev.chain_hash(fields(r) for r in rows[:-1]))


def _sign(conn: Connection, kind: str, subject_text: str, event_id: int, statement: bytes, now: datetime) -> None:
    signer = policy_of(conn.engine).signer
    if signer is None:
        return
    conn.execute(
        insert(st.signed_events).values(
            kind=kind,
            event_id=event_id,
            subject=subject_text,
            statement_hash=hashlib.sha256(statement).hexdigest(),
            signer=signer.identity,
            keyid=keyid_of(signer.public_key),
            signature=signer.sign(ev.signed_bytes(statement)).hex(),
            signed_at=now,
        )
    )
    mark = STATE_FROM if kind == ev.STATE else ALIAS_FROM
    if _property(conn, mark) is None:  # once: a concurrent first signature keeps the other's (the earlier) mark
        from dsv_platform.adapters.registry.publication import insert_ignore  # here: publication.py imports queries.py, which imports this

        insert_ignore(conn, st.registry_properties, name=mark, value=str(event_id), recorded_by=signer.identity, recorded_at=now)


def sign_state(conn: Connection, realization_id: int, now: datetime) -> None:
    """Sign the newest event of ``realization_id`` as the engine's signer (nothing without one)."""
    if policy_of(conn.engine).signer is None:
        return
    row = conn.execute(select(s.realizations).where(s.realizations.c.id == realization_id)).one()
    rows = _state_rows(conn, realization_id)
    subject = {"realization_id": realization_id, "dataset": row.dataset, "version": row.version, "manifest_hash": row.manifest_hash}
    _sign(conn, ev.STATE, f"realization:{realization_id}", int(rows[-1].id), _statement(ev.STATE, subject, rows), now)


def sign_alias(conn: Connection, name: str, version: str, alias: str, now: datetime) -> None:
    """Sign the newest move of ``name:version@alias`` as the engine's signer (nothing without one)."""
    if policy_of(conn.engine).signer is None:
        return
    rows = _alias_rows(conn, name, version, alias)
    subject = {"dataset": name, "version": version, "alias": alias}
    _sign(conn, ev.ALIAS, f"alias:{name}:{version}@{alias}", int(rows[-1].id), _statement(ev.ALIAS, subject, rows), now)


def signers(conn: Connection, kind: str, event_ids: list[int]) -> dict[int, str]:
    """``{event id: signer}`` of the signed events among ``event_ids``: who acted is the identity that signed, not the free-text column."""
    t = st.signed_events
    if not event_ids:
        return {}
    rows = conn.execute(select(t.c.event_id, t.c.signer).where(t.c.kind == kind, t.c.event_id.in_(event_ids)))
    return {int(r.event_id): str(r.signer) for r in rows}


# ---------------------------------------------------------------- verification


def _untrusted(ref: str, message: str, **detail: object) -> UntrustedError:
    return UntrustedError(f"{ref}: {message}", ref=ref, detail=dict(detail))


def _check_signed(conn: Connection, kind: str, ref: str, what: str, last: Row[Any], statement: bytes, roles: tuple[Role, ...], definition: str) -> str | None:
    """The signer of ``last``, verified; None when unsigned and not required; UntrustedError naming ``what`` otherwise."""
    policy = policy_of(conn.engine)
    t = st.signed_events
    sig = conn.execute(select(t).where(t.c.kind == kind, t.c.event_id == int(last.id))).first()
    if sig is None:
        since = _property(conn, STATE_FROM if kind == ev.STATE else ALIAS_FROM)
        if _property(conn, "strict") == "1" or (since is not None and int(last.id) >= int(since)):
            raise _untrusted(ref, f"{what} is not signed (every {kind} event of this registry must be)", event=int(last.id))
        return None
    detail = {"event": int(last.id), "signer": sig.signer, "keyid": sig.keyid}
    if sig.statement_hash != hashlib.sha256(statement).hexdigest():
        raise _untrusted(ref, f"{what} is not what {sig.signer!r} signed: the event, an event before it or the row it moved was changed", **detail)
    checks = chain(conn, policy.root)
    key = verified_key(conn, sig.signer, policy.root, ref=ref, checks=checks)
    if key is None or keyid_of(key) != sig.keyid:
        raise _untrusted(ref, f"{what}: signer {sig.signer!r} has no registered key {sig.keyid}", **detail)
    if not verifies(key, bytes.fromhex(sig.signature), ev.signed_bytes(statement)):
        raise _untrusted(ref, f"{what}: the signature of {sig.signer!r} does not verify", **detail)
    covers = lambda g: any(grant_covers(g, r, definition=definition) for r in roles)  # noqa: E731
    covering = verified_grants(conn, sig.signer, policy.root, ref=ref, only=covers, checks=checks)
    if roles and not covering:
        needed = " or ".join(r.value for r in roles)
        raise _untrusted(ref, f"{what}: signer {sig.signer!r} does not hold the {needed} role for {definition}", **detail)
    return str(sig.signer)


def _describe(row: Row[Any]) -> str:
    return f"state event #{row.id} ({row.from_state or '-'} -> {row.to_state} by {row.actor} at {ev.moment(row.at)})"


def verify_state(conn: Connection, realization: Realization, ref: str, *, signature: bool = True) -> None:
    """The realization's state is the one its newest event moved it to, and (``signature``) that event is validly signed."""
    rows = _state_rows(conn, realization.id)
    if not rows:
        if signature and (_property(conn, "strict") == "1" or _property(conn, STATE_FROM) is not None):
            raise _untrusted(ref, f"the registry says {realization.state.value}, but it has no state event at all", state=realization.state.value)
        return
    last = rows[-1]
    if last.to_state != realization.state.value:
        raise _untrusted(
            ref, f"the registry says {realization.state.value}, but its newest {_describe(last)} says {last.to_state}", event=int(last.id)
        )
    if not signature:
        return
    subject = {"realization_id": realization.id, "dataset": realization.dataset, "version": realization.version, "manifest_hash": realization.manifest_hash}
    roles = ev.role_for_transition(last.from_state, last.to_state)
    definition = f"{realization.dataset}:{realization.version}"
    _check_signed(conn, ev.STATE, ref, _describe(last), last, _statement(ev.STATE, subject, rows), roles, definition)


def verify_alias(conn: Connection, record: AliasRecord, ref: str) -> None:
    """The alias row is the target of its newest recorded move, and that move is validly signed by a publisher."""
    rows = _alias_rows(conn, record.dataset, record.version, record.alias)
    last = rows[-1] if rows else None
    if last is None or last.new_target != record.target or int(last.generation) != record.generation:
        said = "no recorded move" if last is None else f"its newest move #{last.id} (generation {last.generation}) points to {last.new_target}"
        raise _untrusted(ref, f"alias {record.alias!r} points to {record.target} (generation {record.generation}), but {said}", alias=record.alias)
    what = f"alias move #{last.id} of {record.alias!r} ({last.old_target or '-'} -> {last.new_target} by {last.actor} at {ev.moment(last.at)})"
    subject = {"dataset": record.dataset, "version": record.version, "alias": record.alias}
    definition = f"{record.dataset}:{record.version}"
    _check_signed(conn, ev.ALIAS, ref, what, last, _statement(ev.ALIAS, subject, rows), (Role.PUBLISHER,), definition)
