"""A GC plan as a value: one decision per node, why it is kept (root and path) or what to do with it.

Built by :func:`dsv_platform.core.retention.gc.plan_gc`; serialized to canonical-ish JSON
so ``dsv gc apply --plan FILE`` can apply exactly what was reviewed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from dsv_platform.core.errors import DsvError
from dsv_platform.core.lineage.lineage import LineageGraph, Node, node_label, parse_node
from dsv_platform.core.retention.gc_inventory import RootSpec

PLAN_FORMAT = "dsv-gc-plan/1"


class GcPlanError(DsvError):
    """A GC plan document is malformed or cannot be applied."""


class Action(str, enum.Enum):
    EXPIRE_REALIZATION = "expire_realization"
    DELETE_OBJECT = "delete_object"
    ABANDON_STAGING = "abandon_staging"
    REMOVE_TAG = "remove_tag"
    EXPIRE_SNAPSHOT = "expire_snapshot"
    DELETE_DATA_FILE = "delete_data_file"
    SET_REF_AGE = "set_ref_age"  # upkeep of a kept dependent pin: its Iceberg max-ref-age-ms (dependent_pins.py)




# ---------------------------------------------------------------- plan


class Decision(NamedTuple):
    """One node's verdict; a named tuple because a plan holds one per stored object (about 3x cheaper to build than a frozen dataclass)."""

    kind: str
    id: str
    keep: bool
    reason: str
    root: str | None = None  # root id keeping it
    action: str | None = None
    bytes: int = 0
    detail: str = ""

    @property
    def node(self) -> Node:
        return (self.kind, self.id)

    def to_row(self) -> list[Any]:
        return list(self)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Decision:
        return cls(*row)


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    root: RootSpec | None
    path: tuple[tuple[Node, str | None], ...]  # from the root's node to the object, with the relation used to step in
    referenced_by: tuple[str, ...] = ()

    def to_document(self) -> dict[str, Any]:
        return {
            "node": node_label(self.decision.node),
            "keep": self.decision.keep,
            "reason": self.decision.reason,
            "action": self.decision.action,
            "bytes": self.decision.bytes,
            "detail": self.decision.detail,
            "root": None if self.root is None else self.root.as_dict(),
            "path": [{"node": node_label(n), "relation": r} for n, r in self.path],
            "referenced_by": list(self.referenced_by),
        }

    def text(self) -> str:
        d = self.decision
        lines = [f"{node_label(d.node)}: {'KEPT' if d.keep else 'COLLECTABLE'} ({d.reason}){' ' + d.detail if d.detail else ''}"]
        if self.root is not None:
            r = self.root
            expiry = f", expires {r.expires_at.isoformat()}" if r.expires_at else ""
            lines.append(f"  root #{r.id} {r.kind} {r.ref} (owner {r.owner}: {r.reason}{expiry})")
        for node, relation in self.path:
            lines.append(f"    {'<-' + relation + '- ' if relation else ''}{node_label(node)}")
        if d.action:
            lines.append(f"  action on apply: {d.action}")
        if self.referenced_by:
            lines.append("  referenced only by collectable or expired nodes: " + ", ".join(self.referenced_by[:10]))
        return "\n".join(lines)


@dataclass
class GcPlan:
    created_at: datetime
    watermark: Mapping[str, Any]
    safety_window_s: float
    roots: list[RootSpec]
    dangling_roots: list[str]
    decisions: list[Decision]
    parents: dict[Node, tuple[Node, str]]
    reached_by: dict[Node, str]
    root_nodes: dict[str, list[Node]]
    _index: dict[Node, Decision] | None = None

    # ---- queries

    def index(self) -> dict[Node, Decision]:
        if self._index is None:
            self._index = {d.node: d for d in self.decisions}
        return self._index

    def collectable(self, action: str | None = None) -> list[Decision]:
        return [d for d in self.decisions if not d.keep and d.action and (action is None or d.action == action)]

    def upkeep(self, action: str | None = None) -> list[Decision]:
        """Kept nodes with an action all the same (a dependent pin's ref age to write)."""
        return [d for d in self.decisions if d.keep and d.action and (action is None or d.action == action)]

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"roots": len(self.roots), "dangling_roots": len(self.dangling_roots)}
        kept_bytes = collectable_bytes = 0
        for d in self.decisions:
            key = f"{d.kind}.{'kept' if d.keep else 'collectable'}"
            out[key] = out.get(key, 0) + 1
            if d.keep:
                kept_bytes += d.bytes
            elif d.action:
                collectable_bytes += d.bytes
        out["bytes.kept"] = kept_bytes
        out["bytes.collectable"] = collectable_bytes
        out["actions"] = sum(1 for d in self.decisions if not d.keep and d.action)
        return dict(sorted(out.items()))

    def find(self, ident: str) -> list[Decision]:
        """Decisions for ``kind:id``, or for every node whose id is ``ident`` (or starts with it, 8+ chars)."""
        node = parse_node(ident)
        idx = self.index()
        if node is not None and node in idx:
            return [idx[node]]
        exact = [d for d in self.decisions if d.id == ident]
        if exact or len(ident) < 8:
            return exact
        return [d for d in self.decisions if d.id.startswith(ident)]

    def explain(self, ident: str, graph: LineageGraph | None = None) -> list[Explanation]:
        roots = {r.id: r for r in self.roots}
        out = []
        for d in self.find(ident):
            path: list[tuple[Node, str | None]] = []
            node: Node | None = d.node
            if d.keep and d.node in self.reached_by:
                steps = 0
                while node is not None and steps < 10_000:
                    parent = self.parents.get(node)
                    path.append((node, parent[1] if parent else None))
                    node = parent[0] if parent else None
                    steps += 1
                path.reverse()
            refs: tuple[str, ...] = ()
            if not d.keep and graph is not None:
                refs = tuple(node_label(n) for n, _ in graph.downstream.get(d.node, ()))
            out.append(Explanation(d, roots.get(d.root) if d.root else None, tuple(path), refs))
        return out

    # ---- documents

    def to_document(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "created_at": self.created_at.isoformat(),
            "watermark": dict(self.watermark),
            "safety_window_s": self.safety_window_s,
            "roots": [r.as_dict() for r in self.roots],
            "dangling_roots": list(self.dangling_roots),
            "figures": self.figures(),
            "decisions": [d.to_row() for d in self.decisions],
            "parents": [[n[0], n[1], p[0][0], p[0][1], p[1]] for n, p in self.parents.items()],
            "reached_by": [[n[0], n[1], r] for n, r in self.reached_by.items()],
            "root_nodes": {k: [list(n) for n in v] for k, v in self.root_nodes.items()},
        }

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> GcPlan:
        if not isinstance(doc, Mapping) or doc.get("format") != PLAN_FORMAT:
            raise GcPlanError(f"not a {PLAN_FORMAT} document")
        try:
            return cls(
                created_at=datetime.fromisoformat(doc["created_at"]),
                watermark=doc["watermark"],
                safety_window_s=float(doc["safety_window_s"]),
                roots=[
                    RootSpec(r["id"], r["kind"], r["ref"], r["reason"], r["owner"], datetime.fromisoformat(r["expires_at"]) if r["expires_at"] else None)
                    for r in doc["roots"]
                ],
                dangling_roots=list(doc["dangling_roots"]),
                decisions=[Decision.from_row(row) for row in doc["decisions"]],
                parents={(a, b): ((c, d), e) for a, b, c, d, e in doc["parents"]},
                reached_by={(a, b): r for a, b, r in doc["reached_by"]},
                root_nodes={k: [tuple(n) for n in v] for k, v in doc["root_nodes"].items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise GcPlanError(f"malformed GC plan document: {exc}") from exc


__all__ = ["PLAN_FORMAT", "Action", "Decision", "Explanation", "GcPlan", "GcPlanError"]
