"""Deriving lineage edges from what the pipeline recorded (never typed by hand).

One recorder per event (a published realization, a canonical load, a label append, a
trained model, the backfill). Recording is idempotent: edges already in the registry are
not added again.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.iceberg.iceberg_maintenance import snapshot_batches
from dsv_platform.adapters.iceberg.iceberg_values import AppendOutcome
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.registry.artifacts import RunRecords
from dsv_platform.adapters.registry.lineage import LineageQueries
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.errors import ConfigurationError, DsvError, NotFoundError, ResolutionError
from dsv_platform.core.lineage.lineage import Edge, NodeKind, Relation, manifest_edges, node_label, parse_node
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.services.lineage.model_impact import model_impact, model_start

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

K = NodeKind
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
SUCCEEDED_BY = Relation.SUCCEEDED_BY.value


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


def record_edges(registry: Registry, edges: Iterable[Edge], *, actor: str) -> int:
    """Record ``edges`` once each (a dependent pin's record, services/reproduction/dependent_pins.py); returns how many were new."""
    return _record_new(registry, edges, actor=actor)


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
        edges = [
            Edge(e.src_kind, e.src_id, e.dst_kind, e.dst_id, e.relation, {**e.attributes, "ref": ref}) if e.dst_kind == K.REALIZATION.value else e
            for e in edges
        ]
    return _record_new(registry, edges, actor=actor)


def _snapshot_edges(table: str, snapshot_id: int, parent_id: int | None) -> list[Edge]:
    if parent_id is None:
        return []
    return [Edge(K.ICEBERG_SNAPSHOT.value, f"{table}@{parent_id}", K.ICEBERG_SNAPSHOT.value, f"{table}@{snapshot_id}", SUCCEEDED_BY)]


def record_snapshot_succession(registry: Registry, table: str, chain: Iterable[int | None], *, actor: str) -> int:
    """``parent --succeeded_by--> child`` along ``chain`` (the commits of a privacy deletion), so impact walks reach what is built on them."""
    ids = [i for i in chain if i is not None]
    return _record_new(registry, [e for a, b in pairwise(ids) if a != b for e in _snapshot_edges(table, b, a)], actor=actor)


def record_load_lineage(registry: Registry, table: str, batch_ref: str, snapshot_id: int, parent_id: int | None, *, actor: str = "dsv-lineage") -> int:
    """``raw_batch:<batch_ref> --loaded_into--> iceberg_snapshot:<table>@<snapshot_id>`` and its parent edge; returns how many were new."""
    loaded = Edge(K.RAW_BATCH.value, batch_ref, K.ICEBERG_SNAPSHOT.value, f"{table}@{snapshot_id}", Relation.LOADED_INTO.value, {"table": table})
    return _record_new(registry, [loaded, *_snapshot_edges(table, snapshot_id, parent_id)], actor=actor)


def record_label_lineage(
    registry: Registry, table: str, snapshot_id: int, parent_id: int | None, inputs: Iterable[tuple[str, int]], *, label: str, actor: str = "dsv-lineage"
) -> int:
    """``iceberg_snapshot:<input>@<id> --derived_from--> iceberg_snapshot:<table>@<snapshot_id>`` per input read, and the parent edge."""
    child = f"{table}@{snapshot_id}"
    derived = Relation.DERIVED_FROM.value
    edges = [Edge(K.ICEBERG_SNAPSHOT.value, f"{t}@{sid}", K.ICEBERG_SNAPSHOT.value, child, derived, {"label_version": label}) for t, sid in inputs]
    return _record_new(registry, [*edges, *_snapshot_edges(table, snapshot_id, parent_id)], actor=actor)


def record_partition_load(platform: Platform, spec: TableSpecLike, appended: Iterable[tuple[str, AppendOutcome]]) -> int:
    """After loading a partition: the lineage of each ``(batch_ref, append outcome)`` that made a snapshot (a reload adds nothing)."""
    new = 0
    for batch_ref, outcome in appended:
        if outcome.appended and outcome.snapshot_id is not None:
            parent = platform.tables.snapshot_parent(spec, outcome.snapshot_id)
            new += record_load_lineage(platform.registry, spec.name, batch_ref, outcome.snapshot_id, parent, actor=platform.actor)
    return new


def record_label_build(platform: Platform, spec: TableSpecLike, outcome: AppendOutcome | None, inputs: Iterable[TableSpecLike], *, label: str) -> int:
    """After appending a label version: ``derived_from`` edges from its inputs' current snapshots (they hold every row read), if it made a snapshot."""
    if outcome is None or outcome.appended == 0 or outcome.snapshot_id is None:
        return 0
    tables = platform.tables
    read = [(s.name, sid) for s in inputs for sid in [tables.current_snapshot_id(s)] if sid is not None]
    parent = tables.snapshot_parent(spec, outcome.snapshot_id)
    return record_label_lineage(platform.registry, spec.name, outcome.snapshot_id, parent, read, label=label, actor=platform.actor)


def model_run_edge(manifest_hash: str, run_hash: str, *, model: str, ref: str, run_object: str) -> Edge:
    """``realization --trained--> model_run:<run hash>``; the model's name, the ref and the run manifest object in its attributes."""
    return Edge(K.REALIZATION.value, manifest_hash, K.MODEL_RUN.value, run_hash, Relation.TRAINED.value, {"model": model, "ref": ref, "run_object": run_object})


def record_model_lineage(registry: Registry, manifest_hash: str, run_hash: str, *, model: str, ref: str, run_object: str, actor: str) -> int:
    """Record the ``trained`` edge once per run manifest (training again on the same inputs adds nothing); returns how many were new."""
    return _record_new(registry, [model_run_edge(manifest_hash, run_hash, model=model, ref=ref, run_object=run_object)], actor=actor)


def artifact_edges(manifest_hash: str, inputs: Iterable[Mapping[str, str]], files: Mapping[str, str], *, artifact: str) -> list[Edge]:
    """``realization --used--> artifact:<hash>`` per input, the manifest object (``run_record``) and each file (``part_of``)."""
    node = (K.ARTIFACT.value, manifest_hash)
    edges = [Edge(K.OBJECT.value, manifest_hash, *node, Relation.RUN_RECORD.value, {"artifact": artifact})]
    for i in inputs:
        attrs = {"artifact": artifact, "dataset": i["dataset"], "ref": i["ref"]}
        edges.append(Edge(K.REALIZATION.value, i["snapshot_id"], *node, Relation.USED.value, attrs))
    edges += [Edge(K.OBJECT.value, digest, *node, Relation.PART_OF.value, {"file": name}) for name, digest in sorted(files.items())]
    return edges


def record_artifact_lineage(
    registry: Registry, manifest_hash: str, inputs: Iterable[Mapping[str, str]], files: Mapping[str, str], *, artifact: str, actor: str
) -> int:
    """Record an artifact's edges once (see :func:`artifact_edges`); returns how many were new."""
    return _record_new(registry, artifact_edges(manifest_hash, inputs, files, artifact=artifact), actor=actor)


def record_activity(registry_or_platform: Registry | Platform, node: str, kind: str, record: Mapping[str, Any], *, actor: str | None = None) -> int:
    """Attach ``record`` (e.g. a reproduction record, ``kind="reproduction"``) to lineage node ``node`` (``artifact:<hash>``); returns its id.

    ``dsv lineage`` prints the activities of every node it shows. Activities are append-only.
    """
    parsed = parse_node(node)
    if parsed is None:
        raise ConfigurationError(f"{node!r} is not a lineage node KIND:ID (e.g. artifact:<hash>, model_run:<hash>)")
    if not kind:
        raise ConfigurationError("an activity needs a kind (e.g. reproduction)")
    registry = registry_or_platform if isinstance(registry_or_platform, Registry) else registry_or_platform.registry
    who = actor or "dsv-lineage" if isinstance(registry_or_platform, Registry) else registry_or_platform.actor  # a platform: its proven identity
    return RunRecords(registry).add_activity(parsed, kind, record, actor=who)


def canonical_edges(tables: CanonicalTables, *, batch_refs: Iterable[str] | None = None) -> list[Edge]:
    """Raw batch -> snapshot and parent -> child snapshot edges from every table in the catalog namespace."""
    allowed = None if batch_refs is None else set(batch_refs)
    edges: list[Edge] = []
    for snap in snapshot_batches(tables):
        node = f"{snap.table}@{snap.snapshot_id}"
        edges.extend(_snapshot_edges(snap.table, snap.snapshot_id, snap.parent_id))
        for batch in snap.batches:
            if allowed is None or batch in allowed:
                edges.append(Edge(K.RAW_BATCH.value, batch, K.ICEBERG_SNAPSHOT.value, node, Relation.LOADED_INTO.value, {"table": snap.table}))
    return edges


def record_canonical_lineage(registry: Registry, tables: CanonicalTables, *, landing: LandingZone | None = None, actor: str = "dsv-lineage") -> int:
    """Record raw batch -> snapshot -> snapshot edges (only landed batches when ``landing`` is given); returns how many were new."""
    refs = None if landing is None else [r.batch_ref for r in landing.records()]
    return _record_new(registry, canonical_edges(tables, batch_refs=refs), actor=actor)


__all__ = [
    "artifact_edges",
    "canonical_edges",
    "model_run_edge",
    "realization_edges",
    "record_activity",
    "record_artifact_lineage",
    "record_canonical_lineage",
    "record_edges",
    "record_label_build",
    "record_label_lineage",
    "record_load_lineage",
    "record_model_lineage",
    "record_partition_load",
    "record_realization_lineage",
]


# ---------------------------------------------------------------- queries (the Python API behind `dsv lineage`)


_RUN_KINDS = (K.ARTIFACT.value, K.MODEL_RUN.value)


def _start_nodes(registry: Registry, query: str) -> list[tuple[str, str]]:
    node = parse_node(query)
    if node is not None and node[0] == K.ARTIFACT.value and not _HEX64.match(node[1]):  # artifact:<name> or artifact:<footer prefix>
        return [(K.ARTIFACT.value, RunRecords(registry).locate(K.ARTIFACT.value, node[1]).manifest_hash or "")]
    if node is not None and node[0] == K.RAW_BATCH.value:
        return _raw_batch_nodes(registry, node[1], query)
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
    found = LineageQueries(registry.engine).kinds_of(query) or model_start(registry, query)  # a model alias or NAME@sha256:<run hash>
    if found:
        return found
    records = RunRecords(registry)
    try:  # an artifact's name (its newest complete run) or its footer hash
        return [(K.ARTIFACT.value, records.locate(K.ARTIFACT.value, query).manifest_hash or "")]
    except NotFoundError:
        if records.runs(kind=K.ARTIFACT.value, name=query.strip()):
            raise  # an artifact with only INTENT or FAILED runs: the error names them
        return []


def _raw_batch_nodes(registry: Registry, ident: str, query: str) -> list[tuple[str, str]]:
    """``raw_batch:<batch id>@<digest>`` (one revision) or ``raw_batch:<batch id>`` (every landed revision); NOT_FOUND when none is recorded."""
    queries = LineageQueries(registry.engine)
    ids = queries.ids_of_kind(K.RAW_BATCH.value, ident=ident) if "@" in ident else queries.ids_of_kind(K.RAW_BATCH.value, prefix=f"{ident}@")
    if not ids:
        raise NotFoundError(f"{query!r}: no raw batch {ident!r} is in the recorded lineage (raw_batch:<batch id> or raw_batch:<batch id>@<digest>)", ref=query)
    return [(K.RAW_BATCH.value, i) for i in ids]


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
            via_label = None if via is None else node_label(via)
            nodes.append({"node": node_label(node), "kind": node[0], "id": node[1], "depth": depth, "via": via_label, "relation": relation})
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
    ids = {i for _, i in found}
    roots = [root.as_dict() for root in registry.list_retention_roots(datetime.now(UTC)) if _root_node(root.ref) in found or root.ref in ids]
    aliases = [{"alias": alias, "target": mh} for mh in states for alias in queries.aliases_targeting(mh)]
    direction = "impact" if impact else "provenance"
    runs = _annotate_runs(RunRecords(registry), nodes, starts)
    activities = [a.as_dict() for a in RunRecords(registry).activities(found)]
    models, deployments = model_impact(registry, nodes)
    return {
        "query": query,
        "direction": direction,
        "start": [node_label(s) for s in starts],
        "nodes": nodes,
        "retention_roots": roots,
        "aliases": aliases,
        "runs": runs,
        "activities": activities,
        "models": models,
        "deployments": deployments,
    }


def _annotate_runs(records: RunRecords, nodes: list[dict[str, Any]], starts: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Mark artifact and model-run nodes with their run (name, state, inputs); return every run of the started names.

    INTENT and FAILED runs are listed as such (never counted as produced).
    """
    names: set[tuple[str, str]] = set()
    for n in nodes:
        if n["kind"] not in _RUN_KINDS:
            continue
        run = next((r for r in records.runs(kind=n["kind"], hash_prefix=n["id"]) if r.manifest_hash == n["id"]), None)
        if run is None:
            continue
        n.update({"name": run.name, "state": run.state, "run_id": run.id, "files": dict(run.files)})
        if run.manifest is not None and n["kind"] == K.ARTIFACT.value:
            n["produced_at"] = run.manifest.get("produced_at")
            n["inputs"] = list(run.manifest.get("inputs") or ())
        if (n["kind"], n["id"]) in starts:
            names.add((n["kind"], run.name))
    return [r.as_dict() for kind, name in sorted(names) for r in records.runs(kind=kind, name=name)]
