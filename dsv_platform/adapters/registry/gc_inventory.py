"""What GC reads from the registry, in one read transaction: realizations, manifests, aliases, active roots, lineage and the state watermark."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from dsv_platform.adapters.registry import lineage as reg_lineage
from dsv_platform.adapters.registry import retention as reg_retention
from dsv_platform.adapters.registry import schema as s
from dsv_platform.core.gc import AliasInfo, RealizationInfo, RootSpec
from dsv_platform.core.lineage import Edge

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


def read_inventory(registry: Registry, *, now: datetime) -> RegistryInventory:
    """The registry's part of a GC inventory, consistent with its state watermark."""
    r = s.realizations
    with registry.engine.connect() as conn, conn.begin():
        watermark = reg_retention.state_watermark(conn)
        published = s.publication_claims.c.claimed_at.label("published_at")
        rows = conn.execute(
            select(r.c.id, r.c.dataset, r.c.version, r.c.state, r.c.manifest_hash, r.c.logical_key, r.c.created_at, published).outerjoin(
                s.publication_claims, s.publication_claims.c.realization_id == r.c.id
            )
        )
        realizations = list(map(RealizationInfo._make, rows))  # the select lists RealizationInfo's fields in order
        manifests = {row[0]: json.loads(row[1]) for row in conn.execute(select(s.manifests.c.manifest_hash, s.manifests.c.canonical_json))}
        aliases = [AliasInfo(m.dataset, m.version, m.alias, m.target_manifest_hash) for m in conn.execute(select(s.aliases))]
        roots = [RootSpec(str(rt.id), rt.kind, rt.ref, rt.reason, rt.owner, rt.expires_at) for rt in reg_retention.list_roots(conn, active_at=now)]
        edges = reg_lineage.load_edges(conn, beyond_manifests=True)
    return RegistryInventory(watermark, realizations, manifests, aliases, roots, edges)


__all__ = ["RegistryInventory", "read_inventory"]
