"""The dependency graph GC walks (see :mod:`dsv_platform.core.retention.gc`).

Built from an :class:`Inventory`: manifests (authoritative), recorded lineage,
Iceberg structure (tags, snapshots, data files) and landing (raw batches).
Keeping too much is the safe direction: nothing a manifest names is collected.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from dsv_platform.core.lineage.lineage import LineageGraph, NodeKind, Relation, manifest_edges
from dsv_platform.core.retention.dependent_pins import dependent_pins, is_pin_edge
from dsv_platform.core.retention.gc_inventory import Inventory

_DIGEST = re.compile(r"[0-9a-f]{64}")


_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
# A JSON string token that is exactly a digest (optionally ``sha256:``-prefixed): it opens after ``[,:{`` (so its
# quote is not an escaped one) and closes before ``,:]}``.
_DIGEST_TOKEN = re.compile(r'(?<=[\[,:{])"(?:sha256:)?([0-9a-f]{64})"(?=[,:\]}])')


def named_digests(doc: Any) -> Iterator[str]:
    """Every SHA-256 digest (64 lowercase hex, optionally ``sha256:``-prefixed) anywhere in a JSON document, keys included."""
    try:  # the C encoder and one regex scan; a value JSON cannot encode takes the walk
        text = _ENCODER.encode([doc])
    except (TypeError, ValueError, RecursionError):
        return walk_digests(doc)
    return iter(_DIGEST_TOKEN.findall(text))


def walk_digests(doc: Any) -> Iterator[str]:
    """:func:`named_digests` by walking the values (any mapping, list or tuple)."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            text = value.removeprefix("sha256:")
            if len(text) == 64 and _DIGEST.fullmatch(text):
                yield text
        elif isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)


class GcGraph(LineageGraph):
    """The GC dependency graph, plus each manifest's total partition bytes (gathered in the same pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.manifest_bytes: dict[str, int] = {}


def build_graph(inv: Inventory) -> GcGraph:
    """The dependency graph GC walks: manifests (authoritative), recorded lineage, Iceberg structure, landing."""
    graph = GcGraph()
    _add_manifests(graph, inv.manifests)
    _add_run_manifests(graph, inv)
    _add_artifacts(graph, inv)
    _add_recorded_lineage(graph, inv)
    _add_dependent_pins(graph, inv)
    for realization in inv.realizations:
        if realization.manifest_hash:
            graph.add_dependency((NodeKind.MANIFEST, realization.manifest_hash), (NodeKind.REALIZATION, realization.manifest_hash), Relation.DESCRIBES)
    for doc in inv.manifests.values():
        splits = doc.get("splits")
        if splits:
            graph.add_dependency((NodeKind.OBJECT, splits["assignment_object"]), (NodeKind.SPLIT_ASSIGNMENT, splits["assignment_object"]), Relation.PART_OF)
    _add_iceberg_and_landing(graph, inv)
    for alias in inv.aliases:
        graph.add_dependency((NodeKind.REALIZATION, alias.target), alias.node, Relation.POINTS_TO)
    return graph


def _add_manifests(graph: GcGraph, manifests: Mapping[str, Mapping[str, Any]]) -> None:
    up, down, sizes = graph.upstream, graph.downstream, graph.manifest_bytes
    obj, part_of, down_get = NodeKind.OBJECT, Relation.PART_OF, graph.downstream.get
    for manifest_hash, doc in manifests.items():
        realization = (NodeKind.REALIZATION, manifest_hash)
        ups = up.setdefault(realization, [])
        link, size = (realization, part_of), 0
        for part in doc.get("partitions") or ():  # the hot path: plain tuples, no Edge objects
            node = (obj, part["object"])
            ups.append((node, part_of))
            downs = down_get(node)
            if downs is None:
                down[node] = [link]
            else:
                downs.append(link)
            size += int(part.get("bytes") or 0)
        sizes[manifest_hash] = size
        rest = dict(doc, partitions=())
        if doc.get("splits") or doc.get("sources") or doc.get("labels") or doc.get("attachments"):  # what manifest_edges reads
            for edge in manifest_edges(manifest_hash, rest):
                graph.add(edge)
        else:  # only the describes edge (what manifest_edges gives for a document without those fields)
            graph.add_dependency((NodeKind.MANIFEST, manifest_hash), realization, Relation.DESCRIBES)
        for digest in set(named_digests(rest)) - {manifest_hash}:  # every other pinned object (environment lock, ...)
            graph.add_dependency((obj, digest), realization, part_of)


def _add_run_manifests(graph: LineageGraph, inv: Inventory) -> None:
    """A model run depends on every object its run manifest names, and on every known realization it names."""
    for run_hash, doc in inv.run_manifests.items():
        run = (NodeKind.MODEL_RUN, run_hash)
        for digest in set(named_digests(doc)) - {run_hash}:
            graph.add_dependency((NodeKind.OBJECT, digest), run, Relation.PART_OF)
            if digest in inv.manifests:
                graph.add_dependency((NodeKind.REALIZATION, digest), run, Relation.TRAINED)


def _add_artifacts(graph: LineageGraph, inv: Inventory) -> None:
    """An artifact depends on its manifest object, its files, every object its manifest names and the realizations it used."""
    for artifact_hash, entry in inv.artifacts.items():
        node = (NodeKind.ARTIFACT, artifact_hash)
        graph.add_dependency((NodeKind.OBJECT, artifact_hash), node, Relation.RUN_RECORD)
        for digest in set(named_digests(entry)) - {artifact_hash}:
            graph.add_dependency((NodeKind.OBJECT, digest), node, Relation.PART_OF)
            if digest in inv.manifests:
                graph.add_dependency((NodeKind.REALIZATION, digest), node, Relation.USED)


def _add_recorded_lineage(graph: LineageGraph, inv: Inventory) -> None:
    for edge in inv.lineage:
        if is_pin_edge(edge):  # a dependent pin counts only when its record and its tag's name agree
            continue
        graph.add(edge)
        run_object = edge.attributes.get("run_object") if edge.relation == Relation.TRAINED else None
        if run_object:
            graph.add_dependency((NodeKind.OBJECT, str(run_object)), (NodeKind.MODEL_RUN, edge.dst_id), Relation.RUN_RECORD)
        if edge.relation == Relation.REPORTS_ON and edge.src_kind == NodeKind.QUALITY_REPORT:
            graph.add_dependency((NodeKind.OBJECT, edge.src_id), edge.src, Relation.PART_OF)
            graph.add_dependency(edge.src, edge.dst, Relation.REPORTS_ON)  # a kept realization keeps its quality report too
        if edge.src_kind == NodeKind.SPLIT_ASSIGNMENT:
            graph.add_dependency((NodeKind.OBJECT, edge.src_id), edge.src, Relation.PART_OF)


def _add_dependent_pins(graph: LineageGraph, inv: Inventory) -> None:
    """A report or model depends on the tags recorded for it (named for it) and on the snapshots they pin."""
    for pin in dependent_pins(inv).values():
        graph.add_dependency(pin.node, pin.owner, Relation.PINNED_BY)
        graph.add_dependency(pin.snapshot_node, pin.owner, Relation.PINNED_BY)


def _add_iceberg_and_landing(graph: LineageGraph, inv: Inventory) -> None:
    for tag in inv.tags:
        graph.add_dependency((NodeKind.ICEBERG_SNAPSHOT, f"{tag.table}@{tag.snapshot_id}"), (NodeKind.ICEBERG_TAG, f"{tag.table}#{tag.tag}"), Relation.PROTECTS)
    for snap in inv.snapshots:
        node = (NodeKind.ICEBERG_SNAPSHOT, f"{snap.table}@{snap.snapshot_id}")
        for path in snap.data_files:
            graph.add_dependency((NodeKind.DATA_FILE, path), node, Relation.CONTAINS)
    raw_refs = {b.batch_ref for b in inv.raw_batches}
    for data_file in inv.data_files:
        for batch in data_file.batches:
            if batch in raw_refs:
                graph.add_dependency((NodeKind.RAW_BATCH, batch), (NodeKind.DATA_FILE, data_file.path), Relation.LOADED_INTO)
    for raw in inv.raw_batches:
        graph.add_dependency((NodeKind.OBJECT, raw.digest), (NodeKind.RAW_BATCH, raw.batch_ref), Relation.PART_OF)
