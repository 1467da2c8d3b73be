"""What GC reads from the registry, in one read transaction: realizations, manifests, aliases, active roots, lineage, model aliases and
current deployments, and the state watermark."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, Text, select, type_coerce
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import lineage as reg_lineage
from dsv_platform.adapters.registry import retention as reg_retention
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.models import model_pointers
from dsv_platform.core.lineage.lineage import Edge
from dsv_platform.core.retention.gc import AliasInfo, RealizationInfo, RootSpec
from dsv_platform.core.retention.gc_inventory import ModelPointer

if TYPE_CHECKING:
    from dsv_platform.adapters.registry.registry import Registry


@dataclass(frozen=True)
class RegistryInventory:
    watermark: dict[str, Any]
    realizations: list[RealizationInfo]
    manifests: dict[str, Any]
    aliases: list[AliasInfo]
    roots: list[RootSpec]
    lineage: list[Edge]
    model_pointers: list[ModelPointer]


def read_inventory(registry: Registry, *, now: datetime) -> RegistryInventory:
    """The registry's part of a GC inventory, consistent with its state watermark."""
    r, claims = s.realizations, s.publication_claims
    with registry.engine.connect() as conn, conn.begin():
        watermark = reg_retention.state_watermark(conn)
        published = type_coerce(claims.c.claimed_at, Text)  # raw values: parsed once per distinct time below
        stmt = select(r.c.id, r.c.dataset, r.c.version, r.c.state, r.c.manifest_hash, r.c.logical_key, type_coerce(r.c.created_at, Text), published)
        utc, new = _utc_parser(), tuple.__new__
        realizations = [
            new(RealizationInfo, (i, ds, v, st, mh, lk, utc(created), utc(pub)))  # RealizationInfo's fields, in order
            for i, ds, v, st, mh, lk, created, pub in _plain_rows(conn, stmt.outerjoin_from(r, claims, claims.c.realization_id == r.c.id))
        ]
        manifests = {mh: json.loads(text) for mh, text in _plain_rows(conn, select(s.manifests.c.manifest_hash, s.manifests.c.canonical_json))}
        aliases = [AliasInfo(m.dataset, m.version, m.alias, m.target_manifest_hash) for m in conn.execute(select(s.aliases))]
        roots = [RootSpec(str(rt.id), rt.kind, rt.ref, rt.reason, rt.owner, rt.expires_at) for rt in reg_retention.list_roots(conn, active_at=now)]
        edges = reg_lineage.load_edges(conn, beyond_manifests=True)
        pointers = [ModelPointer(kind, name, run_hash) for kind, name, run_hash in model_pointers(conn)]  # read with the watermark
    return RegistryInventory(watermark, realizations, manifests, aliases, roots, edges, pointers)


def _plain_rows(conn: Connection, stmt: Select[Any]) -> list[Any]:
    """The DBAPI tuples of a parameterless select, in the caller's transaction (no per-row Row objects at 10^5 rows)."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(str(stmt.compile(dialect=conn.dialect)))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _utc_parser() -> Callable[[Any], datetime | None]:
    """Stored time (SQLite text, a driver datetime) -> aware UTC datetime, what ``UtcDateTime`` gives; each distinct value parsed once."""
    seen: dict[Any, datetime] = {}

    def utc(value: Any) -> datetime | None:
        if value is None:
            return None
        moment = seen.get(value)
        if moment is None:
            moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
            moment = seen[value] = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        return moment

    return utc


__all__ = ["RegistryInventory", "read_inventory"]
