"""GC roots and what they reach (see :mod:`dsv_platform.core.retention.gc` for the root order).

:func:`collect_roots` lists the active roots (explicit retention roots, aliases,
definition heads, quarantined realizations, model alias targets and current deployments, table heads,
staging branches younger than their ref age, raw batches awaiting load) with the nodes each one names; :func:`reach` walks upstream from them,
multi-source breadth first, so the first root to reach a node is the one reported.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from dsv_platform.core.errors import DsvError
from dsv_platform.core.lineage.lineage import LineageGraph, Node, NodeKind, parse_node
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.publication.states import READABLE, RealizationState
from dsv_platform.core.retention.gc_inventory import Inventory, RealizationInfo, RootSpec
from dsv_platform.core.retention.policy import GcPolicy

Published = Mapping[tuple[str, str], list[RealizationInfo]]
_READABLE = frozenset(s.value for s in READABLE)


@dataclass
class Roots:
    """The active roots in claim order, the nodes each names, and explicit roots that name nothing."""

    specs: list[RootSpec] = field(default_factory=list)
    nodes: dict[str, list[Node]] = field(default_factory=dict)
    dangling: list[str] = field(default_factory=list)

    def add(self, spec: RootSpec, nodes: list[Node]) -> None:
        self.specs.append(spec)
        self.nodes[spec.id] = nodes


def published_by_version(inv: Inventory) -> dict[tuple[str, str], list[RealizationInfo]]:
    """Published realizations per definition version, newest first (heads and rollback windows)."""
    published: dict[tuple[str, str], list[RealizationInfo]] = {}
    for r in inv.realizations:
        if r.published_at is not None and r.manifest_hash:
            published.setdefault((r.dataset, r.version), []).append(r)
    for rs in published.values():
        rs.sort(key=lambda r: (r.published_at, r.id), reverse=True)
    return published


def resolve_root(ref: str, heads: Published, graph: LineageGraph, aliases: Mapping[str, Node]) -> list[Node]:
    """The nodes a retention root's ``ref`` names: a node id, a realization ref (``name:v6~3``, ``name:v6~all``, ``@alias``, hash) or a search."""
    node = parse_node(ref)
    if node is not None:
        return [node]
    base, tilde, count = ref.partition("~")
    try:
        parsed = parse_ref(base)
    except DsvError:
        parsed = None
    if parsed is None:
        return list(graph.find(ref))
    if parsed.manifest_hash:
        return [(NodeKind.REALIZATION, parsed.manifest_hash)]
    if parsed.alias:
        alias_node = aliases.get(f"{parsed.name}:{parsed.version}@{parsed.alias}")
        return [alias_node] if alias_node else []
    published = heads.get((parsed.name, parsed.version), [])
    readable = [r for r in published if r.state in _READABLE]
    n = len(readable) if tilde and count == "all" else int(count) if tilde and count.isdigit() else 1  # ~all: a definition_retention root
    return [(NodeKind.REALIZATION, r.manifest_hash) for r in readable[:n] if r.manifest_hash]


def collect_roots(inv: Inventory, policy: GcPolicy, graph: LineageGraph, published: Published) -> Roots:
    """Every root active at ``inv.observed_at``, in the order they claim what they reach."""
    roots = Roots()
    alias_nodes = {a.node[1]: a.node for a in inv.aliases}
    for spec in inv.roots:
        if spec.expires_at is not None and spec.expires_at <= inv.observed_at:
            continue
        nodes = resolve_root(spec.ref, published, graph, alias_nodes)
        roots.add(spec, nodes)
        if not nodes:
            roots.dangling.append(f"#{spec.id} {spec.kind} {spec.ref}")
    for alias in inv.aliases:
        roots.add(RootSpec(f"alias:{alias.node[1]}", "alias", alias.node[1], "alias (may only point at a readable realization)", "platform"), [alias.node])
    if policy.keep_heads:
        for (name, version), rs in sorted(published.items()):
            head = next((r for r in rs if r.state in _READABLE), None)
            if head is not None:
                spec = RootSpec(f"head:{name}:{version}", "head", f"{name}:{version}", "newest readable realization of the definition version", "platform")
                roots.add(spec, [(NodeKind.REALIZATION, head.manifest_hash or "")])
    _add_platform_roots(roots, inv)
    return roots


def _add_platform_roots(roots: Roots, inv: Inventory) -> None:
    for r in inv.realizations:
        if r.state == RealizationState.QUARANTINED.value and r.manifest_hash:
            roots.add(
                RootSpec(f"review:{r.id}", "review", r.manifest_hash, "quarantined, pending review", "platform"), [(NodeKind.REALIZATION, r.manifest_hash)]
            )
    for snap in inv.snapshots:
        if snap.is_current:
            ref = f"{snap.table}@{snap.snapshot_id}"
            roots.add(
                RootSpec(f"table_head:{snap.table}", "table_head", ref, "current snapshot of a canonical table", "platform"), [(NodeKind.ICEBERG_SNAPSHOT, ref)]
            )
    for pointer in inv.model_pointers:  # a model alias target and a target's current deployment keep the model and what it was trained on
        why = "model alias target" if pointer.kind == "model_alias" else "model version a target serves now (its current deployment)"
        spec = RootSpec(f"{pointer.kind}:{pointer.name}", pointer.kind, f"{NodeKind.MODEL_RUN}:{pointer.run_hash}", why, "platform")
        roots.add(spec, [(NodeKind.MODEL_RUN, pointer.run_hash)])
    _add_staging_roots(roots, inv)
    published = _published_files(inv)  # a blocked load's rows, only on its staging branch, do not make its raw batch loaded
    loaded = {b for f in inv.data_files if f.path in published for b in f.batches}
    for raw in inv.raw_batches:
        if not raw.loadable or raw.batch_ref not in loaded:
            why = "quarantined raw batch (raw is kept longest)" if not raw.loadable else "raw batch awaiting canonical load"
            roots.add(RootSpec(f"landing:{raw.batch_ref}", "landing", raw.batch_ref, why, "platform"), [(NodeKind.RAW_BATCH, raw.batch_ref)])


def _add_staging_roots(roots: Roots, inv: Inventory) -> None:
    """A staging branch a blocked load left keeps its snapshot, its data files and raw batches until its ref age passes."""
    committed = {(s.table, s.snapshot_id): s.timestamp for s in inv.snapshots}
    for tag in (t for t in inv.tags if t.branch):  # its max_ref_age_ms: the branch's, else the default (core/ingest/staging.py)
        until = committed.get((tag.table, tag.snapshot_id), inv.observed_at) + timedelta(milliseconds=tag.max_ref_age_ms or 0)
        ref = f"{tag.table}#{tag.tag}"
        if until > inv.observed_at:
            why = "staging branch of a blocked load, kept for inspection (write-audit-publish)"
            roots.add(RootSpec(f"staging:{ref}", "staging_branch", ref, why, "platform", until), [(NodeKind.ICEBERG_TAG, ref)])


def _published_files(inv: Inventory) -> set[str]:
    """The data files of every snapshot but those only staging branches hold (from a branch head down to main's history)."""
    parent = {(s.table, s.snapshot_id): s.parent_id for s in inv.snapshots}

    def walk(start: tuple[str, int], stop: set[tuple[str, int]]) -> Iterator[tuple[str, int]]:
        node: tuple[str, int] | None = start
        while node is not None and node in parent and node not in stop:
            yield node
            above = parent[node]
            node = None if above is None else (node[0], above)

    main: set[tuple[str, int]] = set()
    for s in (s for s in inv.snapshots if s.is_current):
        main.update(walk((s.table, s.snapshot_id), main))
    staged: set[tuple[str, int]] = set()
    for tag in (t for t in inv.tags if t.branch):
        staged.update(walk((tag.table, tag.snapshot_id), main | staged))
    return {p for s in inv.snapshots if (s.table, s.snapshot_id) not in staged for p in s.data_files}


Reached = tuple[dict[Node, tuple[Node, str]], dict[Node, str]]


def reach(roots: Roots, graph: LineageGraph, *, after: int = 0, claimed: Reached | None = None) -> Reached:
    """Multi-source BFS upstream: ``(parents, reached_by)``; the first root to reach a node claims it.

    With ``claimed`` (what an earlier walk reached) only the roots from ``after`` on walk, and only into nodes still unclaimed.
    """
    parents, reached_by = claimed if claimed is not None else ({}, {})
    queue: deque[Node] = deque()
    for spec in roots.specs[after:]:
        for node in roots.nodes[spec.id]:
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
    return parents, reached_by
