"""Lineage: the edge vocabulary and graph walks over an in-memory edge list (pure).

A node is ``(kind, id)``; :func:`dependency` normalizes an edge to ``(upstream, downstream)``
so that provenance, impact and garbage collection all walk one graph.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class NodeKind(enum.StrEnum):
    RAW_BATCH = "raw_batch"
    ICEBERG_SNAPSHOT = "iceberg_snapshot"
    ICEBERG_TAG = "iceberg_tag"
    DATA_FILE = "data_file"
    LABEL_VERSION = "label_version"
    REALIZATION = "realization"
    MANIFEST = "manifest"
    OBJECT = "object"
    SPLIT_ASSIGNMENT = "split_assignment"
    QUALITY_REPORT = "quality_report"
    MODEL_RUN = "model_run"
    ARTIFACT = "artifact"  # artifact:<artifact manifest hash> (a report, figure, backtest)
    ALIAS = "alias"
    DEPLOYMENT = "deployment"  # deployment:<target>@<run hash> (a model version served on a target)
    STAGING = "staging"
    RETENTION_ROOT = "retention_root"


class Relation(enum.StrEnum):
    LOADED_INTO = "loaded_into"  # raw_batch -> iceberg_snapshot
    SUCCEEDED_BY = "succeeded_by"  # parent iceberg_snapshot -> child (the child holds the parent's rows)
    DERIVED_FROM = "derived_from"  # input iceberg_snapshot -> label table snapshot computed from it
    PINNED_BY = "pinned_by"  # iceberg_snapshot -> realization
    PROTECTS = "protects"  # iceberg_tag <- ... (tag -> snapshot: the snapshot is kept by the tag)
    LABELS = "labels"  # label_version -> realization
    PART_OF = "part_of"  # object / split_assignment -> realization
    DESCRIBES = "describes"  # manifest -> realization
    TRAINED = "trained"  # realization -> model_run
    RUN_RECORD = "run_record"  # object (run manifest) -> model_run
    PROMOTED_TO = "promoted_to"  # model_run -> alias
    DEPLOYED_TO = "deployed_to"  # model_run -> deployment (the deployment served that model version)
    USED = "used"  # realization -> artifact (an input the artifact was computed from)
    REPORTS_ON = "reports_on"  # quality_report -> realization (the report depends on the realization)
    SIGNS = "signs"  # object (the publisher's DSSE envelope) -> realization: kept as long as the realization
    DOCUMENTS = "documents"  # object (the dataset card stored at publication) -> realization: kept as long as the realization
    POINTS_TO = "points_to"  # realization -> alias
    CONTAINS = "contains"  # data_file -> iceberg_snapshot
    RELEASED = "released"  # retention_root -> anything: an audit record, not a dependency


# Relations whose *source* depends on the destination (reversed), and relations that are not dependencies.
REVERSED = frozenset({Relation.REPORTS_ON.value})
NOT_DEPENDENCIES = frozenset({Relation.RELEASED.value})

Node = tuple[str, str]


@dataclass(frozen=True)
class Edge:
    src_kind: str
    src_id: str
    dst_kind: str
    dst_id: str
    relation: str
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def src(self) -> Node:
        return (self.src_kind, self.src_id)

    @property
    def dst(self) -> Node:
        return (self.dst_kind, self.dst_id)

    def as_tuple(self) -> tuple[str, str, str, str, str, Mapping[str, Any]]:
        return (self.src_kind, self.src_id, self.dst_kind, self.dst_id, self.relation, dict(self.attributes))


def dependency(edge: Edge) -> tuple[Node, Node] | None:
    """``(upstream, downstream)`` of an edge, or None for an edge that is not a dependency."""
    if edge.relation in NOT_DEPENDENCIES:
        return None
    if edge.relation in REVERSED:
        return edge.dst, edge.src
    return edge.src, edge.dst


def node_label(node: Node) -> str:
    return f"{node[0]}:{node[1]}"


LEGACY_MODEL_KIND = "model"  # before model_run: ``model`` / ``model:<name>@<run hash>``


def canonical_node(kind: str, ident: str) -> Node:
    """The node as recorded today: a legacy ``model`` node (id ``[model:]<name>@<run hash>``) is ``model_run:<run hash>``."""
    if kind == LEGACY_MODEL_KIND and "@" in ident:
        return (NodeKind.MODEL_RUN.value, ident.rsplit("@", 1)[1])
    return (kind, ident)


def parse_node(text: str) -> Node | None:
    """``kind:id`` for a known kind (and the legacy ``model:<name>@<run hash>``), else None."""
    kind, sep, ident = text.partition(":")
    if kind == LEGACY_MODEL_KIND and sep and "@" in ident:
        return canonical_node(kind, ident)
    if sep and ident and kind in {k.value for k in NodeKind}:
        return (kind, ident)
    return None


# ---------------------------------------------------------------- manifests -> edges


def manifest_edges(manifest_hash: str, doc: Mapping[str, Any]) -> list[Edge]:
    """What a manifest document says a realization is made of, as edges into ``realization:<manifest_hash>``.

    Works on the plain document (``json.loads`` of the stored canonical JSON)
    so that planning over many manifests does not validate each one again.
    """
    dst = (NodeKind.REALIZATION, manifest_hash)
    edges = [Edge(NodeKind.MANIFEST, manifest_hash, *dst, Relation.DESCRIBES)]
    for part in doc.get("partitions") or ():
        edges.append(Edge(NodeKind.OBJECT, part["object"], *dst, Relation.PART_OF, {"partition": part["key"], "bytes": part.get("bytes")}))
    splits = doc.get("splits")
    if splits:
        edges.append(Edge(NodeKind.SPLIT_ASSIGNMENT, splits["assignment_object"], *dst, Relation.PART_OF, {"assignment_hash": splits.get("assignment_hash")}))
    for source in doc.get("sources") or ():
        attrs = {"tag": source.get("tag"), "table": source["table"], "snapshot_id": str(source["snapshot_id"])}
        edges.append(Edge(NodeKind.ICEBERG_SNAPSHOT, f"{source['table']}@{source['snapshot_id']}", *dst, Relation.PINNED_BY, attrs))
        if source.get("tag"):
            edges.append(Edge(NodeKind.ICEBERG_TAG, f"{source['table']}#{source['tag']}", *dst, Relation.PINNED_BY, attrs))
    labels = doc.get("labels")
    if labels:
        edges.append(Edge(NodeKind.LABEL_VERSION, f"{labels['name']}@{labels['version']}", *dst, Relation.LABELS))
    for name, digest in sorted((doc.get("attachments") or {}).items()):
        edges.append(Edge(NodeKind.OBJECT, digest, *dst, Relation.PART_OF, {"attachment": name}))
    return edges


# ---------------------------------------------------------------- graph


class LineageGraph:
    """Adjacency over normalized dependencies: ``upstream[n]`` are what ``n`` depends on, ``downstream[n]`` what depends on ``n``."""

    def __init__(self, edges: Iterable[Edge] = ()) -> None:
        self.upstream: dict[Node, list[tuple[Node, str]]] = {}
        self.downstream: dict[Node, list[tuple[Node, str]]] = {}
        for edge in edges:
            self.add(edge)

    def add(self, edge: Edge) -> None:
        dep = dependency(edge)
        if dep is None:
            return
        up, down = dep
        if up == down:
            return
        self.upstream.setdefault(down, []).append((up, edge.relation))
        self.downstream.setdefault(up, []).append((down, edge.relation))

    def add_dependency(self, up: Node, down: Node, relation: str) -> None:
        self.upstream.setdefault(down, []).append((up, relation))
        self.downstream.setdefault(up, []).append((down, relation))

    def nodes(self) -> set[Node]:
        return set(self.upstream) | set(self.downstream)

    def walk(self, start: Node, *, direction: str) -> Iterator[tuple[Node, int, Node | None, str | None]]:
        """Breadth-first ``(node, depth, reached_from, relation)`` from ``start`` (included, depth 0)."""
        adjacency = self.upstream if direction == "upstream" else self.downstream
        seen = {start}
        queue: deque[tuple[Node, int]] = deque([(start, 0)])
        yield start, 0, None, None
        while queue:
            node, depth = queue.popleft()
            for nxt, relation in adjacency.get(node, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, depth + 1))
                    yield nxt, depth + 1, node, relation

    def provenance(self, start: Node) -> list[tuple[Node, int, Node | None, str | None]]:
        """Everything ``start`` was made of (upstream closure), nearest first."""
        return list(self.walk(start, direction="upstream"))

    def impact(self, start: Node) -> list[tuple[Node, int, Node | None, str | None]]:
        """Everything that depends on ``start`` (downstream closure), nearest first."""
        return list(self.walk(start, direction="downstream"))

    def find(self, ident: str) -> list[Node]:
        """Nodes whose id is ``ident`` (any kind)."""
        return sorted(n for n in self.nodes() if n[1] == ident)
