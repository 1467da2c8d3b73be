"""Garbage collection as reachability: a pure plan (docs/architecture.md, "Garbage collection is reachability").

Whatever a retention root, an alias or the platform itself still needs is kept; only what
no root reaches, outside the safety window, is collectable. The plan carries the registry
watermark it was computed at. Nothing here touches storage. The graph is built in
``gc_graph``, roots in ``gc_roots``, decisions in ``gc_decide``.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import gc as _pygc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dsv_platform.core.lineage.lineage import LineageGraph, Node, NodeKind, node_label
from dsv_platform.core.retention.dependent_pins import AGEING, ageing_pins, dependent_pins
from dsv_platform.core.retention.gc_decide import IN_FLIGHT, TERMINAL_DONE, Decider
from dsv_platform.core.retention.gc_graph import build_graph
from dsv_platform.core.retention.gc_inventory import (  # re-exported
    AliasInfo,
    DataFileInfo,
    Inventory,
    RawBatchInfo,
    RealizationInfo,
    RootSpec,
    SnapshotInfo,
    StagingInfo,
    StoredObject,
    TagInfo,
)
from dsv_platform.core.retention.gc_plan import (  # re-exported
    Action,
    Decision,
    Explanation,
    GcPlan,
    GcPlanError,
)
from dsv_platform.core.retention.gc_roots import collect_roots, published_by_version, reach
from dsv_platform.core.retention.policy import GcPolicy  # re-exported

_DEFAULT_POLICY = GcPolicy()


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


def plan_gc(inv: Inventory, policy: GcPolicy = _DEFAULT_POLICY) -> GcPlan:
    """Every owned node, kept (with the root that reaches it) or collectable (with why and the apply action)."""
    with bulk():
        return _plan_gc(inv, policy)


def _plan_gc(inv: Inventory, policy: GcPolicy) -> GcPlan:
    now = inv.observed_at
    graph = build_graph(inv)
    roots = collect_roots(inv, policy, graph, published_by_version(inv))
    parents, reached_by = reach(roots, graph)
    pins = dependent_pins(inv)
    ageing, _ = ageing_pins(inv, pins, reached_by, policy.max_ref_age)  # the pins of what roots no longer reach: kept until they age out
    first = len(roots.specs)
    for a in ageing:
        why = f"pin of {node_label(pins[a.node].owner)}, no longer retained: ages out at {a.until.isoformat()}"
        roots.add(RootSpec(f"{AGEING}:{a.node[1]}", AGEING, node_label(a.node), why, "platform", a.until), [a.node])
    parents, reached_by = reach(roots, graph, after=first, claimed=(parents, reached_by))
    decisions = Decider(inv, graph, reached_by, now - policy.safety_window, pins, {a.node: a for a in ageing}).decide_all()
    safety_s = policy.safety_window.total_seconds()
    return GcPlan(now, dict(inv.watermark), safety_s, roots.specs, roots.dangling, decisions, parents, reached_by, roots.nodes)


def root_costs(inv: Inventory, plan: GcPlan, graph: LineageGraph | None = None) -> list[dict[str, Any]]:
    """Bytes each root keeps: everything it reaches (``bytes``) and what only it keeps (``exclusive_bytes``)."""
    graph = graph or build_graph(inv)
    sizes: dict[Node, int] = {}
    for o in inv.objects:
        sizes[(NodeKind.OBJECT, o.digest)] = o.size
    for f in inv.data_files:
        sizes[(NodeKind.DATA_FILE, f.path)] = f.size
    reach_of: dict[str, set[Node]] = {}
    counts: dict[Node, int] = {}
    for spec in plan.roots:
        seen: set[Node] = set()
        for start in plan.root_nodes.get(spec.id, ()):
            if start in seen:
                continue
            for node, _, _, _ in graph.walk(start, direction="upstream"):
                seen.add(node)
        sized = {n for n in seen if n in sizes}
        reach_of[spec.id] = sized
        for n in sized:
            counts[n] = counts.get(n, 0) + 1
    out = []
    for spec in plan.roots:
        nodes = reach_of[spec.id]
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
    "IN_FLIGHT",
    "TERMINAL_DONE",
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
    "bulk",
    "plan_gc",
    "root_costs",
]
