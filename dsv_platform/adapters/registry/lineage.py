"""Lineage edges in the registry: reading them, and walking them in SQL for one node's provenance or impact.

Writing stays :meth:`Registry.record_lineage` (append-only). A walk issues one
indexed query per breadth-first level (``ix_lineage_src`` / ``ix_lineage_dst``),
so its cost follows the size of the answer, not of the registry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from sqlalchemy import and_, or_, select
from sqlalchemy.engine import Connection, Engine

from dsv_platform.adapters.registry import schema as s
from dsv_platform.core.lineage.lineage import LEGACY_MODEL_KIND, NOT_DEPENDENCIES, REVERSED, Edge, LineageGraph, Node, NodeKind, canonical_node

_BATCH = 400


def _edge(row: object) -> Edge:
    """One stored edge; a legacy ``model`` node is read as the ``model_run`` it names."""
    m = row._mapping  # type: ignore[attr-defined]
    src, dst = canonical_node(m["src_kind"], m["src_id"]), canonical_node(m["dst_kind"], m["dst_id"])
    return Edge(*src, *dst, m["relation"], json.loads(m["attributes_json"] or "{}"))


# Edges a stored manifest already implies (GC reads the manifests themselves, the authority).
MANIFEST_RELATIONS = ("part_of", "pinned_by", "labels", "describes")


def load_edges(conn: Connection, *, node: Node | None = None, beyond_manifests: bool = False) -> list[Edge]:
    """Recorded edges, oldest first: all, those touching ``node``, or (``beyond_manifests``) those no manifest implies."""
    t = s.lineage_edges
    stmt = select(t).order_by(t.c.id)
    if beyond_manifests:
        stmt = stmt.where(~and_(t.c.dst_kind == "realization", t.c.relation.in_(MANIFEST_RELATIONS)))
    if node is not None:
        stmt = stmt.where(or_(and_(t.c.src_kind == node[0], t.c.src_id == node[1]), and_(t.c.dst_kind == node[0], t.c.dst_id == node[1])))
    return [_edge(r) for r in conn.execute(stmt)]


def _touching(conn: Connection, nodes: Iterable[Node], *, as_src: bool) -> list[Edge]:
    t = s.lineage_edges
    kind_c, id_c = (t.c.src_kind, t.c.src_id) if as_src else (t.c.dst_kind, t.c.dst_id)
    by_kind: dict[str, list[str]] = {}
    for kind, ident in nodes:
        by_kind.setdefault(kind, []).append(ident)
    out: list[Edge] = []
    for kind, idents in sorted(by_kind.items()):  # (kind, id) matches the (kind, id) indexes
        for i in range(0, len(idents), _BATCH):
            for row in conn.execute(select(t).where(kind_c == kind, id_c.in_(idents[i : i + _BATCH]))):
                out.append(_edge(row))
    for run_hash in by_kind.get(NodeKind.MODEL_RUN.value, ()):  # edges recorded before model_run: model:<name>@<run hash>
        for row in conn.execute(select(t).where(kind_c == LEGACY_MODEL_KIND, id_c.like(f"%@{run_hash}"))):
            out.append(_edge(row))
    return out


def walk_subgraph(conn: Connection, start: Node, *, direction: str, max_nodes: int = 100_000, with_manifests: bool = False) -> LineageGraph:
    """The part of the lineage reachable from ``start`` upstream or downstream, as a graph.

    With ``with_manifests``, upstream walks also read each realization's stored
    manifest (authoritative even where no edge was recorded).
    """
    from dsv_platform.core.lineage.lineage import manifest_edges

    graph = LineageGraph()
    seen = {start}
    frontier = [start]
    while frontier and len(seen) < max_nodes:
        level = set(frontier)
        found: list[Edge] = _touching(conn, frontier, as_src=True) + _touching(conn, frontier, as_src=False)
        if with_manifests and direction == "upstream":
            hashes = [n[1] for n in frontier if n[0] == "realization"]
            if hashes:
                rows = conn.execute(select(s.manifests.c.manifest_hash, s.manifests.c.canonical_json).where(s.manifests.c.manifest_hash.in_(hashes)))
                for mh, text in rows:
                    found.extend(manifest_edges(mh, json.loads(text)))
        nxt: list[Node] = []
        # an edge is a dependency up -> down; depending on the relation, up is src (usual) or dst (reversed)
        for e in found:
            if e.relation in NOT_DEPENDENCIES:
                continue
            up, down = (e.dst, e.src) if e.relation in REVERSED else (e.src, e.dst)
            here, there = (down, up) if direction == "upstream" else (up, down)
            if here not in level:
                continue
            graph.add(e)
            if there not in seen:
                seen.add(there)
                nxt.append(there)
        frontier = nxt
    return graph


def walk_with_manifests(conn: Connection, start: Node, *, direction: str, max_nodes: int = 100_000) -> LineageGraph:
    """:func:`walk_subgraph` reading stored manifests too (what provenance answers use)."""
    return walk_subgraph(conn, start, direction=direction, max_nodes=max_nodes, with_manifests=True)


def kinds_of(conn: Connection, ident: str) -> list[Node]:
    """Every recorded node whose id is ``ident``."""
    t = s.lineage_edges
    nodes = {(r[0], ident) for r in conn.execute(select(t.c.src_kind).where(t.c.src_id == ident).distinct())}
    nodes |= {(r[0], ident) for r in conn.execute(select(t.c.dst_kind).where(t.c.dst_id == ident).distinct())}
    if conn.execute(select(s.manifests.c.manifest_hash).where(s.manifests.c.manifest_hash == ident)).first():
        nodes.add(("realization", ident))
    return sorted(nodes)


def ids_of_kind(conn: Connection, kind: str, *, ident: str | None = None, prefix: str | None = None) -> list[str]:
    """The recorded ids of ``kind`` that equal ``ident`` or start with ``prefix`` (either end of an edge)."""
    t = s.lineage_edges
    found: set[str] = set()
    for kind_col, id_col in ((t.c.src_kind, t.c.src_id), (t.c.dst_kind, t.c.dst_id)):
        cond = id_col == ident if ident is not None else id_col.startswith(prefix or "", autoescape=True)
        found |= {str(r[0]) for r in conn.execute(select(id_col).where(kind_col == kind, cond).distinct())}
    return sorted(found)


def aliases_targeting(conn: Connection, manifest_hash: str) -> list[str]:
    """``NAME:VERSION@ALIAS`` of every alias currently pointing at ``manifest_hash``."""
    rows = conn.execute(select(s.aliases).where(s.aliases.c.target_manifest_hash == manifest_hash))
    return [f"{row.dataset}:{row.version}@{row.alias}" for row in rows]


class LineageQueries:
    """Read-only lineage queries of one registry (what ``dsv lineage`` asks)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def kinds_of(self, ident: str) -> list[Node]:
        with self.engine.connect() as conn:
            return kinds_of(conn, ident)

    def ids_of_kind(self, kind: str, *, ident: str | None = None, prefix: str | None = None) -> list[str]:
        with self.engine.connect() as conn:
            return ids_of_kind(conn, kind, ident=ident, prefix=prefix)

    def walk(self, start: Node, *, direction: str) -> LineageGraph:
        with self.engine.connect() as conn:
            return walk_with_manifests(conn, start, direction=direction)

    def aliases_targeting(self, manifest_hash: str) -> list[str]:
        with self.engine.connect() as conn:
            return aliases_targeting(conn, manifest_hash)


__all__ = ["LineageQueries", "aliases_targeting", "ids_of_kind", "kinds_of", "load_edges", "walk_subgraph", "walk_with_manifests"]
