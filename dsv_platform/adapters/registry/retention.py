"""Retention roots in the registry: what garbage collection must keep, who asked and until when.

A root is ``(kind, ref, reason, owner, expires_at)``. Kinds are
``RETENTION_ROOT_KINDS`` (model versions, legal holds, reports, experiments,
aliases, rollback windows). ``ref`` names what the root keeps: a dataset
reference (``name:v6@sha256:...``), a lineage node (``model:fraud_model@3``)
or any lineage id. Releasing a root sets ``released_at`` (the row stays, for
the audit); an expired root stops counting at ``expires_at``. Every function
runs inside the caller's transaction.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Row, and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_models as sm
from dsv_platform.core.errors import ConfigurationError, NotFoundError
from dsv_platform.core.publication.records import RetentionRoot


def _from_row(row: Row[Any]) -> RetentionRoot:
    m = row._mapping
    return RetentionRoot(
        id=m["id"],
        kind=m["kind"],
        ref=m["ref"],
        reason=m["reason"],
        owner=m["owner"],
        created_at=m["created_at"],
        expires_at=m["expires_at"],
        released_at=m["released_at"],
    )


def add_root(conn: Connection, *, kind: str, ref: str, reason: str, owner: str, expires_at: datetime | None, now: datetime) -> int:
    if kind not in s.RETENTION_ROOT_KINDS:
        raise ConfigurationError(f"retention root kind {kind!r} is not one of {', '.join(s.RETENTION_ROOT_KINDS)}")
    if not ref or not reason or not owner:
        raise ConfigurationError("a retention root needs a ref, a reason and an owner")
    if expires_at is not None and expires_at.tzinfo is None:
        raise ConfigurationError(f"expires_at must be timezone-aware, got {expires_at!r}")
    t = s.retention_roots
    existing = conn.execute(
        select(t.c.id).where(t.c.kind == kind, t.c.ref == ref, t.c.owner == owner, t.c.reason == reason, t.c.released_at.is_(None))
    ).first()
    if existing is not None and (expires_at is None or _expiry(conn, existing[0]) == expires_at):
        return int(existing[0])  # idempotent: the same active root again
    result = conn.execute(insert(t).values(kind=kind, ref=ref, reason=reason, owner=owner, created_at=now, expires_at=expires_at))
    return q.inserted_id(result)


def _expiry(conn: Connection, root_id: int) -> datetime | None:
    return conn.execute(select(s.retention_roots.c.expires_at).where(s.retention_roots.c.id == root_id)).scalar()


def list_roots(conn: Connection, *, active_at: datetime | None = None, kind: str | None = None) -> list[RetentionRoot]:
    """Every root (``active_at`` None) or those not released and not expired at ``active_at``."""
    t = s.retention_roots
    stmt = select(t).order_by(t.c.id)
    if kind is not None:
        stmt = stmt.where(t.c.kind == kind)
    if active_at is not None:
        stmt = stmt.where(t.c.released_at.is_(None), or_(t.c.expires_at.is_(None), t.c.expires_at > active_at))
    return [_from_row(r) for r in conn.execute(stmt)]


def get_root(conn: Connection, root_id: int) -> RetentionRoot:
    row = conn.execute(select(s.retention_roots).where(s.retention_roots.c.id == root_id)).first()
    if row is None:
        raise NotFoundError(f"no retention root {root_id}", detail={"root_id": root_id})
    return _from_row(row)


def release_root(conn: Connection, root_id: int, *, actor: str, reason: str, now: datetime) -> RetentionRoot:
    """Set ``released_at``; idempotent. Who released it and why go into a lineage edge (the audit trail)."""
    root = get_root(conn, root_id)
    if root.released_at is not None:
        return root
    t = s.retention_roots
    conn.execute(update(t).where(and_(t.c.id == root_id, t.c.released_at.is_(None))).values(released_at=now))
    conn.execute(
        insert(s.lineage_edges).values(
            src_kind="retention_root",
            src_id=str(root_id),
            dst_kind=root.kind,
            dst_id=root.ref,
            relation="released",
            recorded_at=now,
            attributes_json=json.dumps({"actor": actor, "reason": reason}, sort_keys=True),
        )
    )
    return get_root(conn, root_id)


def state_watermark(conn: Connection) -> dict[str, Any]:
    """A fingerprint of everything a GC plan depends on; any write that could change a GC decision changes it.

    Counters and maxima of append-mostly tables, plus the newest state change,
    alias move and root release. Comparing two watermarks for equality tells a
    stale plan.
    """
    r, e, m, a, ah, le, rr = (
        s.realizations,
        s.realization_events,
        s.manifests,
        s.aliases,
        s.alias_history,
        s.lineage_edges,
        s.retention_roots,
    )

    def one(stmt: Any) -> Any:
        return conn.execute(stmt).first()

    rows = {
        "realizations": one(select(func.count(), func.max(r.c.id), func.max(r.c.state_changed_at))),
        "events": one(select(func.max(e.c.id))),
        "manifests": one(select(func.count()).select_from(m)),
        "aliases": one(select(func.count(), func.max(a.c.updated_at)).select_from(a)),
        "alias_history": one(select(func.max(ah.c.id))),
        "lineage": one(select(func.count(), func.max(le.c.id)).select_from(le)),
        "roots": one(select(func.count(), func.max(rr.c.id), func.max(rr.c.released_at), func.count(rr.c.released_at)).select_from(rr)),
        "model_aliases": one(select(func.count(), func.max(sm.model_alias_history.c.id)).select_from(sm.model_alias_history)),  # GC roots too
        "deployments": one(select(func.count(), func.max(sm.model_deployments.c.id)).select_from(sm.model_deployments)),
    }
    return {k: [v.isoformat() if isinstance(v, datetime) else v for v in row] for k, row in rows.items()}
