"""Deriving lineage edges from what the pipeline recorded (never typed by hand).

* :func:`record_realization_lineage`: a published manifest -> edges into its
  realization from each partition object, the split assignment, every pinned
  source snapshot (``table@snapshot_id``) and its tag, the label version and
  the attachments (core/lineage.py ``manifest_edges``); plus the alias, if the
  caller names it.
* :func:`record_canonical_lineage`: Iceberg metadata -> ``raw_batch ->
  iceberg_snapshot`` (``loaded_into``: the snapshot whose added data files
  carry the batch in ``_batch``) and ``parent snapshot -> child snapshot``
  (``succeeded_by``: a child holds its parent's rows).

Recording is idempotent: edges already in the registry are not added again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg_maintenance import snapshot_batches
from dsv_platform.adapters.landing import LandingZone
from dsv_platform.adapters.registry.lineage import LineageQueries
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, NotFoundError, ResolutionError
from dsv_platform.core.lineage import Edge, NodeKind, Relation, manifest_edges, node_label, parse_node
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.refs import parse_ref

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

K = NodeKind
SUCCEEDED_BY = "succeeded_by"


def _record_new(registry: Registry, edges: Iterable[Edge], *, actor: str) -> int:
    edges = list(edges)
    if not edges:
        return 0
    known: set[tuple[str, str, str, str, str]] = set()
    for node in {e.dst for e in edges}:
        for e in registry.lineage_edges(node=node):
            known.add((e.src_kind, e.src_id, e.dst_kind, e.dst_id, e.relation))
    new, seen = [], set()
    for e in edges:
        key = (e.src_kind, e.src_id, e.dst_kind, e.dst_id, e.relation)
        if key not in known and key not in seen:
            seen.add(key)
            new.append(e.as_tuple())
    return registry.record_lineage(new, actor=actor)


def realization_edges(manifest: Manifest, *, alias: str | None = None) -> list[Edge]:
    mh = manifest.manifest_hash
    edges = manifest_edges(mh, manifest.to_document())
    if alias:
        edges.append(Edge(K.REALIZATION.value, mh, K.ALIAS.value, f"{manifest.dataset}:{manifest.version}@{alias}", Relation.POINTS_TO.value))
    return edges


def record_realization_lineage(registry: Registry, manifest: Manifest, ref: str | None = None, *, alias: str | None = None, actor: str = "dsv-lineage") -> int:
    """Record the edges a published manifest implies; returns how many were new."""
    edges = realization_edges(manifest, alias=alias)
    if ref:
        edges = [Edge(e.src_kind, e.src_id, e.dst_kind, e.dst_id, e.relation, {**e.attributes, "ref": ref}) if e.dst_kind == K.REALIZATION.value else e for e in edges]
    return _record_new(registry, edges, actor=actor)


def canonical_edges(tables: CanonicalTables, *, batch_refs: Iterable[str] | None = None) -> list[Edge]:
    """Raw batch -> snapshot and parent -> child snapshot edges from every table in the catalog namespace."""
    allowed = None if batch_refs is None else set(batch_refs)
    edges: list[Edge] = []
    for snap in snapshot_batches(tables):
        node = f"{snap.table}@{snap.snapshot_id}"
        if snap.parent_id is not None:
            edges.append(Edge(K.ICEBERG_SNAPSHOT.value, f"{snap.table}@{snap.parent_id}", K.ICEBERG_SNAPSHOT.value, node, SUCCEEDED_BY))
        for batch in snap.batches:
            if allowed is None or batch in allowed:
                edges.append(Edge(K.RAW_BATCH.value, batch, K.ICEBERG_SNAPSHOT.value, node, Relation.LOADED_INTO.value, {"table": snap.table}))
    return edges


def record_canonical_lineage(registry: Registry, tables: CanonicalTables, *, landing: LandingZone | None = None, actor: str = "dsv-lineage") -> int:
    """Record raw batch -> snapshot -> snapshot edges (only landed batches when ``landing`` is given); returns how many were new."""
    refs = None if landing is None else [r.batch_ref for r in landing.records()]
    return _record_new(registry, canonical_edges(tables, batch_refs=refs), actor=actor)


__all__ = ["canonical_edges", "realization_edges", "record_canonical_lineage", "record_realization_lineage"]


# ---------------------------------------------------------------- queries (the Python API behind `dsv lineage`)


def _start_nodes(registry: Registry, query: str) -> list[tuple[str, str]]:
    node = parse_node(query)
    if node is not None:
        return [node]
    try:
        ref = parse_ref(query)
    except DsvError:
        ref = None
    if ref is not None:
        if ref.manifest_hash:
            return [(K.REALIZATION.value, ref.manifest_hash)]
        try:
            return [(K.REALIZATION.value, registry.resolve_ref(ref).manifest_hash or "")]
        except ResolutionError as exc:
            mh = (getattr(exc, "detail", None) or {}).get("manifest_hash")
            if mh:
                return [(K.REALIZATION.value, mh)]
            raise
    return LineageQueries(registry.engine).kinds_of(query)


def _root_node(ref: str) -> tuple[str, str] | None:
    """The lineage node a retention root names: ``kind:id``, a dataset ref pinned to a manifest, or None (matched by id only)."""
    node = parse_node(ref)
    if node is not None:
        return node
    try:
        parsed = parse_ref(ref.partition("~")[0])
    except DsvError:  # a free-form ref
        return None
    return (K.REALIZATION.value, parsed.manifest_hash) if parsed.manifest_hash else None


def _walk(queries: LineageQueries, starts: list[tuple[str, str]], direction: str) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for start in starts:
        for node, depth, via, relation in queries.walk(start, direction=direction).walk(start, direction=direction):
            if node in seen:
                continue
            seen.add(node)
            nodes.append({"node": node_label(node), "kind": node[0], "id": node[1], "depth": depth, "via": None if via is None else node_label(via), "relation": relation})
    return nodes


def lineage(platform: Platform, query: str, *, impact: bool = False) -> dict[str, Any]:
    """Provenance (default) or impact of ``query`` (a dataset ref, ``kind:id``, or a bare id) with states and retention roots on the path."""
    registry = platform.registry
    queries = LineageQueries(registry.engine)
    starts = _start_nodes(registry, query)
    if not starts:
        raise NotFoundError(f"{query!r} is not in the recorded lineage", ref=query)
    nodes = _walk(queries, starts, "downstream" if impact else "upstream")
    states: dict[str, Any] = {}
    for n in nodes:
        if n["kind"] == K.REALIZATION.value:
            r = registry.find_by_manifest_hash(n["id"])
            if r is not None:
                n["state"] = r.state.value
                n["ref"] = r.ref
                states[n["id"]] = r
    found = {(n["kind"], n["id"]) for n in nodes}
    roots = [root.as_dict() for root in registry.list_retention_roots(datetime.now(UTC)) if _root_node(root.ref) in found or any(root.ref == i for _, i in found)]
    aliases = [{"alias": alias, "target": mh} for mh in states for alias in queries.aliases_targeting(mh)]
    return {"query": query, "direction": "impact" if impact else "provenance", "start": [node_label(s) for s in starts], "nodes": nodes, "retention_roots": roots, "aliases": aliases}
