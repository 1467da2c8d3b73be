"""Garbage collection as reachability: a pure plan (ARCHITECTURE.md, "Garbage collection is reachability").

Input: an :class:`Inventory` of everything the platform owns (realizations and
their manifests, content-addressed objects, staging leftovers, Iceberg
snapshots, tags and data files, raw batches), the recorded lineage, the
aliases and the retention roots, plus the registry watermark it was read at.

Roots, in the order they claim what they reach:

1. explicit retention roots active at ``observed_at`` (model versions,
   reports, legal holds, experiments, rollback windows, aliases), each with
   owner, reason and optional expiry;
2. every alias (it may move only to a readable realization);
3. implicit roots the platform itself needs: the newest readable realization
   of every definition version (``name:v6`` must keep resolving; policy
   ``keep_heads``), quarantined realizations (pending review), every table's
   current snapshot, raw batches not yet loaded or quarantined (raw is kept
   longest).

The plan walks dependencies upstream from the roots (multi-source breadth
first; the first root to reach a node is the one reported, with the path).
A node not reached is collectable unless it is inside the safety window
(created or modified less than ``safety_window`` before ``observed_at``,
which also protects builds in flight), in which case it is kept "by the
safety window". Manifests are metadata kept for the audit: an EXPIRED answer
still names its manifest.

The plan carries the watermark; the adapter refuses to apply it once the
registry has moved on (see adapters/gc.py). Nothing here touches storage.
"""

from __future__ import annotations

import gc as _pygc
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from dsv_platform.core.errors import DsvError
from dsv_platform.core.gc_inventory import (  # re-exported
    RootSpec,
    RealizationInfo,
    StoredObject,
    StagingInfo,
    SnapshotInfo,
    TagInfo,
    DataFileInfo,
    RawBatchInfo,
    AliasInfo,
    Inventory,
    GcPolicy,
)
from dsv_platform.core.gc_plan import (  # re-exported
    GcPlanError,
    Action,
    Decision,
    Explanation,
    GcPlan,
)
from dsv_platform.core.lineage import LineageGraph, Node, NodeKind, Relation, manifest_edges, parse_node
from dsv_platform.core.refs import parse_ref
from dsv_platform.core.states import READABLE, RealizationState

K = NodeKind
_K_ALIAS = NodeKind.ALIAS.value
_K_DATA_FILE = NodeKind.DATA_FILE.value
_K_ICEBERG_SNAPSHOT = NodeKind.ICEBERG_SNAPSHOT.value
_K_ICEBERG_TAG = NodeKind.ICEBERG_TAG.value
_K_MANIFEST = NodeKind.MANIFEST.value
_K_MODEL_RUN = NodeKind.MODEL_RUN.value
_K_OBJECT = NodeKind.OBJECT.value
_K_QUALITY_REPORT = NodeKind.QUALITY_REPORT.value
_K_RAW_BATCH = NodeKind.RAW_BATCH.value
_K_REALIZATION = NodeKind.REALIZATION.value
_K_SPLIT_ASSIGNMENT = NodeKind.SPLIT_ASSIGNMENT.value
_K_STAGING = NodeKind.STAGING.value
_R_CONTAINS = Relation.CONTAINS.value
_R_DESCRIBES = Relation.DESCRIBES.value
_R_LOADED_INTO = Relation.LOADED_INTO.value
_R_PART_OF = Relation.PART_OF.value
_R_POINTS_TO = Relation.POINTS_TO.value
_R_PROTECTS = Relation.PROTECTS.value
_R_REPORTS_ON = Relation.REPORTS_ON.value
_R_RUN_RECORD = Relation.RUN_RECORD.value
_R_TRAINED = Relation.TRAINED.value
S = RealizationState
IN_FLIGHT = frozenset({S.STAGING.value, S.SEALED.value})
TERMINAL_DONE = frozenset({S.EXPIRED.value, S.REDACTED.value})


# ---------------------------------------------------------------- planning


def build_graph(inv: Inventory) -> LineageGraph:
    """The dependency graph GC walks: manifests (authoritative), recorded lineage, Iceberg structure, landing."""
    graph = LineageGraph()
    add = graph.add
    up, down = graph.upstream, graph.downstream
    obj, part_of = _K_OBJECT, _R_PART_OF
    for manifest_hash, doc in inv.manifests.items():
        realization = (_K_REALIZATION, manifest_hash)
        ups = up.setdefault(realization, [])
        for part in doc.get("partitions") or ():  # the hot path: plain tuples, no Edge objects
            node = (obj, part["object"])
            ups.append((node, part_of))
            down.setdefault(node, []).append((realization, part_of))
        rest = dict(doc, partitions=())
        for edge in manifest_edges(manifest_hash, rest):
            add(edge)
    for edge in inv.lineage:
        add(edge)
        run_object = edge.attributes.get("run_object") if edge.relation == _R_TRAINED else None
        if run_object:
            graph.add_dependency((_K_OBJECT, str(run_object)), (_K_MODEL_RUN, edge.dst_id), _R_RUN_RECORD)
        if edge.relation == _R_REPORTS_ON and edge.src_kind == _K_QUALITY_REPORT:
            graph.add_dependency((_K_OBJECT, edge.src_id), edge.src, _R_PART_OF)
        if edge.src_kind == _K_SPLIT_ASSIGNMENT:
            graph.add_dependency((_K_OBJECT, edge.src_id), edge.src, _R_PART_OF)
    for realization in inv.realizations:
        if realization.manifest_hash:
            graph.add_dependency((_K_MANIFEST, realization.manifest_hash), (_K_REALIZATION, realization.manifest_hash), _R_DESCRIBES)
    for manifest_hash, doc in inv.manifests.items():
        splits = doc.get("splits")
        if splits:
            graph.add_dependency((_K_OBJECT, splits["assignment_object"]), (_K_SPLIT_ASSIGNMENT, splits["assignment_object"]), _R_PART_OF)
    for tag in inv.tags:
        graph.add_dependency((_K_ICEBERG_SNAPSHOT, f"{tag.table}@{tag.snapshot_id}"), (_K_ICEBERG_TAG, f"{tag.table}#{tag.tag}"), _R_PROTECTS)
    for snap in inv.snapshots:
        node = (_K_ICEBERG_SNAPSHOT, f"{snap.table}@{snap.snapshot_id}")
        for path in snap.data_files:
            graph.add_dependency((_K_DATA_FILE, path), node, _R_CONTAINS)
    raw_refs = {b.batch_ref for b in inv.raw_batches}
    for data_file in inv.data_files:
        for batch in data_file.batches:
            if batch in raw_refs:
                graph.add_dependency((_K_RAW_BATCH, batch), (_K_DATA_FILE, data_file.path), _R_LOADED_INTO)
    for raw in inv.raw_batches:
        graph.add_dependency((_K_OBJECT, raw.digest), (_K_RAW_BATCH, raw.batch_ref), _R_PART_OF)
    for alias in inv.aliases:
        graph.add_dependency((_K_REALIZATION, alias.target), alias.node, _R_POINTS_TO)
    return graph


def _resolve_root(ref: str, inv: Inventory, heads: Mapping[tuple[str, str], list[RealizationInfo]], graph: LineageGraph, aliases: Mapping[str, Node]) -> list[Node]:
    node = parse_node(ref)
    if node is not None:
        return [node]
    base, tilde, count = ref.partition("~")
    try:
        parsed = parse_ref(base)
    except DsvError:
        parsed = None
    if parsed is not None:
        if parsed.manifest_hash:
            return [(_K_REALIZATION, parsed.manifest_hash)]
        if parsed.alias:
            alias_node = aliases.get(f"{parsed.name}:{parsed.version}@{parsed.alias}")
            return [alias_node] if alias_node else []
        published = heads.get((parsed.name, parsed.version), [])
        n = int(count) if tilde and count.isdigit() else 1
        readable = [r for r in published if r.state in {s.value for s in READABLE}]
        return [(_K_REALIZATION, r.manifest_hash) for r in readable[:n] if r.manifest_hash]
    return [n for n in graph.find(ref)]


@contextmanager
def bulk() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while millions of tuples are built (none of them form cycles)."""
    enabled = _pygc.isenabled()
    _pygc.disable()
    try:
        yield
    finally:
        if enabled:
            _pygc.enable()


def plan_gc(inv: Inventory, policy: GcPolicy = GcPolicy()) -> GcPlan:
    """Every owned node, kept (with the root that reaches it) or collectable (with why and the apply action)."""
    with bulk():
        return _plan_gc(inv, policy)


def _plan_gc(inv: Inventory, policy: GcPolicy) -> GcPlan:
    now = inv.observed_at
    horizon = now - policy.safety_window
    graph = build_graph(inv)

    def recent(at: datetime | None) -> bool:
        return at is None or at > horizon

    # published realizations per definition version, newest first (heads and rollback windows)
    published: dict[tuple[str, str], list[RealizationInfo]] = {}
    for r in inv.realizations:
        if r.published_at is not None and r.manifest_hash:
            published.setdefault((r.dataset, r.version), []).append(r)
    for rs in published.values():
        rs.sort(key=lambda r: (r.published_at, r.id), reverse=True)
    alias_nodes = {a.node[1]: a.node for a in inv.aliases}

    roots: list[RootSpec] = []
    root_nodes: dict[str, list[Node]] = {}
    dangling: list[str] = []
    for spec in inv.roots:
        if spec.expires_at is not None and spec.expires_at <= now:
            continue
        nodes = _resolve_root(spec.ref, inv, published, graph, alias_nodes)
        roots.append(spec)
        root_nodes[spec.id] = nodes
        if not nodes:
            dangling.append(f"#{spec.id} {spec.kind} {spec.ref}")
    for alias in inv.aliases:
        rid = f"alias:{alias.node[1]}"
        roots.append(RootSpec(rid, "alias", alias.node[1], "alias (may only point at a readable realization)", "platform"))
        root_nodes[rid] = [alias.node]
    readable = {s.value for s in READABLE}
    if policy.keep_heads:
        for (name, version), rs in sorted(published.items()):
            head = next((r for r in rs if r.state in readable), None)
            if head is not None:
                rid = f"head:{name}:{version}"
                roots.append(RootSpec(rid, "head", f"{name}:{version}", "newest readable realization of the definition version", "platform"))
                root_nodes[rid] = [(_K_REALIZATION, head.manifest_hash or "")]
    for r in inv.realizations:
        if r.state == S.QUARANTINED.value and r.manifest_hash:
            rid = f"review:{r.id}"
            roots.append(RootSpec(rid, "review", r.manifest_hash, "quarantined, pending review", "platform"))
            root_nodes[rid] = [(_K_REALIZATION, r.manifest_hash)]
    for snap in inv.snapshots:
        if snap.is_current:
            rid = f"table_head:{snap.table}"
            roots.append(RootSpec(rid, "table_head", f"{snap.table}@{snap.snapshot_id}", "current snapshot of a canonical table", "platform"))
            root_nodes[rid] = [(_K_ICEBERG_SNAPSHOT, f"{snap.table}@{snap.snapshot_id}")]
    loaded = {b for f in inv.data_files for b in f.batches}
    for raw in inv.raw_batches:
        if not raw.loadable or raw.batch_ref not in loaded:
            rid = f"landing:{raw.batch_ref}"
            why = "quarantined raw batch (raw is kept longest)" if not raw.loadable else "raw batch awaiting canonical load"
            roots.append(RootSpec(rid, "landing", raw.batch_ref, why, "platform"))
            root_nodes[rid] = [(_K_RAW_BATCH, raw.batch_ref)]

    # multi-source BFS upstream
    parents: dict[Node, tuple[Node, str]] = {}
    reached_by: dict[Node, str] = {}
    queue: deque[Node] = deque()
    for spec in roots:
        for node in root_nodes[spec.id]:
            if node not in reached_by:
                reached_by[node] = spec.id
                queue.append(node)
    upstream = graph.upstream
    while queue:
        node = queue.popleft()
        rid = reached_by[node]
        for nxt, relation in upstream.get(node, ()):
            if nxt not in reached_by:
                reached_by[nxt] = rid
                parents[nxt] = (node, relation)
                queue.append(nxt)

    decisions: list[Decision] = []
    append = decisions.append

    def kept_by_root(node: Node, size: int) -> Decision | None:
        rid = reached_by.get(node)
        if rid is None:
            return None
        return Decision(node[0], node[1], True, "reachable from a root", rid, None, size)

    # realizations
    for r in inv.realizations:
        ident = r.manifest_hash or f"candidate-{r.id}"
        node = (_K_REALIZATION, ident)
        size = sum(int(p.get("bytes") or 0) for p in (inv.manifests.get(r.manifest_hash or "", {}).get("partitions") or ()))
        d = kept_by_root(node, size) if r.manifest_hash else None
        if d is not None:
            append(Decision(d.kind, d.id, True, d.reason, d.root, None, size, f"state {r.state}"))
        elif r.state in TERMINAL_DONE:
            append(Decision(node[0], node[1], False, f"already {r.state}", None, None, size, f"realization {r.id}"))
        elif recent(r.created_at):
            append(Decision(node[0], node[1], True, "within the safety window", None, None, size, f"state {r.state}, created {r.created_at.isoformat()}"))
        else:
            append(Decision(node[0], node[1], False, "no root reaches it", None, Action.EXPIRE_REALIZATION.value, size, f"realization {r.id}, state {r.state}"))
        if r.manifest_hash:
            append(Decision(_K_MANIFEST, r.manifest_hash, True, "audit metadata (kept after expiry)", reached_by.get((_K_MANIFEST, r.manifest_hash)), None, 0))
    # objects
    for o in inv.objects:
        node = (_K_OBJECT, o.digest)
        d = kept_by_root(node, o.size)
        if d is not None:
            append(d)
        elif recent(o.modified_at):
            append(Decision(node[0], node[1], True, "within the safety window", None, None, o.size, "" if o.modified_at else "modification time unknown"))
        else:
            referenced = node in graph.downstream
            why = "referenced only by unreachable or expired nodes" if referenced else "referenced by nothing"
            append(Decision(node[0], node[1], False, why, None, Action.DELETE_OBJECT.value, o.size))
    # staging leftovers
    for st in inv.staging:
        node = (_K_STAGING, st.attempt_id)
        if recent(st.last_modified):
            append(Decision(node[0], node[1], True, "within the safety window (build may be in flight)", None, None, st.size))
        else:
            append(Decision(node[0], node[1], False, "abandoned staging attempt", None, Action.ABANDON_STAGING.value, st.size, f"last modified {st.last_modified.isoformat()}"))
    # Iceberg
    snap_time = {(s.table, s.snapshot_id): s.timestamp for s in inv.snapshots}
    in_flight_keys = {f"{r.dataset}-{r.version}-{r.logical_key}" for r in inv.realizations if r.state in IN_FLIGHT}
    for tag in inv.tags:
        node = (_K_ICEBERG_TAG, f"{tag.table}#{tag.tag}")
        d = kept_by_root(node, 0)
        if d is not None:
            append(d)
        elif tag.tag in in_flight_keys:
            append(Decision(node[0], node[1], True, "pinned for a build in flight", None, None, 0))
        elif recent(snap_time.get((tag.table, tag.snapshot_id))):
            append(Decision(node[0], node[1], True, "within the safety window", None, None, 0))
        else:
            append(Decision(node[0], node[1], False, "no kept realization pins it", None, Action.REMOVE_TAG.value, 0, f"snapshot {tag.snapshot_id}"))
    for snap in inv.snapshots:
        node = (_K_ICEBERG_SNAPSHOT, f"{snap.table}@{snap.snapshot_id}")
        d = kept_by_root(node, 0)
        if d is not None:
            append(d)
        elif recent(snap.timestamp):
            append(Decision(node[0], node[1], True, "within the safety window", None, None, 0))
        else:
            append(Decision(node[0], node[1], False, "no kept realization or tag needs it", None, Action.EXPIRE_SNAPSHOT.value, 0, snap.table))
    for f in inv.data_files:
        node = (_K_DATA_FILE, f.path)
        d = kept_by_root(node, f.size)
        if d is not None:
            append(d)
        elif recent(f.modified_at):
            append(Decision(node[0], node[1], True, "within the safety window", None, None, f.size))
        else:
            append(Decision(node[0], node[1], False, "no live snapshot references it", None, Action.DELETE_DATA_FILE.value, f.size, f.table))
    for raw in inv.raw_batches:
        node = (_K_RAW_BATCH, raw.batch_ref)
        d = kept_by_root(node, raw.size)
        append(d if d is not None else Decision(node[0], node[1], False, "no live snapshot holds its rows", None, None, raw.size, "its object is collected with the objects"))
    return GcPlan(now, dict(inv.watermark), policy.safety_window.total_seconds(), roots, dangling, decisions, parents, reached_by, root_nodes)


def root_costs(inv: Inventory, plan: GcPlan, graph: LineageGraph | None = None) -> list[dict[str, Any]]:
    """Bytes each root keeps: everything it reaches (``bytes``) and what only it keeps (``exclusive_bytes``)."""
    graph = graph or build_graph(inv)
    sizes: dict[Node, int] = {}
    for o in inv.objects:
        sizes[(_K_OBJECT, o.digest)] = o.size
    for f in inv.data_files:
        sizes[(_K_DATA_FILE, f.path)] = f.size
    reach: dict[str, set[Node]] = {}
    counts: dict[Node, int] = {}
    for spec in plan.roots:
        seen: set[Node] = set()
        for start in plan.root_nodes.get(spec.id, ()):
            if start in seen:
                continue
            for node, _, _, _ in graph.walk(start, direction="upstream"):
                seen.add(node)
        sized = {n for n in seen if n in sizes}
        reach[spec.id] = sized
        for n in sized:
            counts[n] = counts.get(n, 0) + 1
    out = []
    for spec in plan.roots:
        nodes = reach[spec.id]
        out.append(
            {
                **spec.as_dict(),
                "objects": len(nodes),
                "bytes": sum(sizes[n] for n in nodes),
                "exclusive_bytes": sum(sizes[n] for n in nodes if counts[n] == 1),
            }
        )
    return out


__all__ = [
    "Action",
    "AliasInfo",
    "DataFileInfo",
    "Decision",
    "Explanation",
    "GcPlan",
    "GcPlanError",
    "GcPolicy",
    "Inventory",
    "RawBatchInfo",
    "RealizationInfo",
    "RootSpec",
    "SnapshotInfo",
    "StagingInfo",
    "StoredObject",
    "TagInfo",
    "build_graph",
    "plan_gc",
    "root_costs",
]
