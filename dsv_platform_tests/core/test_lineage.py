"""Lineage vocabulary and walks (pure)."""

from __future__ import annotations

from dsv_platform.core.lineage.lineage import Edge, LineageGraph, NodeKind, Relation, canonical_node, dependency, manifest_edges, node_label, parse_node


def test_lineage_reports_on_is_reversed_and_released_is_not_a_dependency() -> None:
    assert dependency(Edge("quality_report", "q", "realization", "r", Relation.REPORTS_ON.value)) == (("realization", "r"), ("quality_report", "q"))
    assert dependency(Edge("retention_root", "1", "legal_hold", "x", Relation.RELEASED.value)) is None


def test_lineage_provenance_and_impact_walks() -> None:
    g = LineageGraph(
        [
            Edge("raw_batch", "b1@d", "iceberg_snapshot", "tx@1", "loaded_into"),
            Edge("iceberg_snapshot", "tx@1", "iceberg_snapshot", "tx@2", "succeeded_by"),
            Edge("iceberg_snapshot", "tx@2", "realization", "m1", "pinned_by"),
            Edge("label_version", "labels@v1", "realization", "m1", "labels"),
            Edge("realization", "m1", "model_run", "run1", "trained"),
            Edge("quality_report", "q1", "realization", "m1", "reports_on"),
        ]
    )
    up = [n for n, *_ in g.provenance(("model_run", "run1"))]
    assert up[:2] == [("model_run", "run1"), ("realization", "m1")]
    assert ("raw_batch", "b1@d") in up and ("label_version", "labels@v1") in up
    down = {n for n, *_ in g.impact(("raw_batch", "b1@d"))}
    assert {("realization", "m1"), ("model_run", "run1"), ("quality_report", "q1")} <= down


def test_lineage_manifest_edges_name_objects_splits_sources_labels() -> None:
    doc = {
        "partitions": [{"key": "a", "object": "o1", "bytes": 1}],
        "splits": {"assignment_object": "s1", "assignment_hash": "x"},
        "sources": [{"table": "tx", "snapshot_id": "5", "tag": "t", "attributes": {}}],
        "labels": {"name": "labels", "version": "v2"},
        "attachments": {"quality_report": "q"},
    }
    srcs = {(e.src_kind, e.src_id) for e in manifest_edges("m", doc)}
    assert {
        ("object", "o1"),
        ("split_assignment", "s1"),
        ("iceberg_snapshot", "tx@5"),
        ("iceberg_tag", "tx#t"),
        ("label_version", "labels@v2"),
        ("object", "q"),
        ("manifest", "m"),
    } == srcs


def test_lineage_parse_node_knows_only_the_vocabulary() -> None:
    assert parse_node("model_run:abc") == (NodeKind.MODEL_RUN.value, "abc")
    assert parse_node("fraud_training_set:v6") is None


def test_lineage_model_run_node_and_the_legacy_model_form() -> None:
    run = "a" * 64
    assert parse_node(f"model_run:{run}") == ("model_run", run)
    assert parse_node(f"model:fraud_model@{run}") == ("model_run", run), "the pre-model_run form still names the run"
    assert canonical_node("model", f"model:fraud_model@{run}") == ("model_run", run)
    assert canonical_node("iceberg_snapshot", "tx@1") == ("iceberg_snapshot", "tx@1")
    assert node_label(("model_run", run)) == f"model_run:{run}"
    assert parse_node("model:") is None and parse_node("nothing:x") is None


def test_lineage_label_snapshots_chain_to_raw_batches() -> None:
    g = LineageGraph(
        [
            Edge("raw_batch", "tx1@d", "iceberg_snapshot", "transactions@1", Relation.LOADED_INTO.value),
            Edge("raw_batch", "cb1@d", "iceberg_snapshot", "chargebacks@7", Relation.LOADED_INTO.value),
            Edge("iceberg_snapshot", "transactions@1", "iceberg_snapshot", "labels@3", Relation.DERIVED_FROM.value),
            Edge("iceberg_snapshot", "chargebacks@7", "iceberg_snapshot", "labels@3", Relation.DERIVED_FROM.value),
            Edge("iceberg_snapshot", "labels@3", "realization", "m1", Relation.PINNED_BY.value),
        ]
    )
    assert {("raw_batch", "tx1@d"), ("raw_batch", "cb1@d")} <= {n for n, *_ in g.provenance(("realization", "m1"))}
    assert ("realization", "m1") in {n for n, *_ in g.impact(("raw_batch", "cb1@d"))}
