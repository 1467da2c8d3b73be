"""GC planning and impact-query benchmark on a synthetic SQLite registry.

Full size: 100,000 realizations, 1,000,000 objects (10 partitions each, a
tenth of them shared between neighbours), 10,000 retention roots (model runs
reached through recorded lineage, plus holds and reports by ref) and the
lineage edges a recorder would write (object -> realization, realization ->
model_run), bulk-inserted with executemany. Measured: inventory + plan
(registry read, manifest parse, graph, multi-source walk, decisions) and one impact
query (an object shared by two realizations -> realizations -> model runs) through
the SQL walk. Run: ``python -m benchmarks.gc_bench [--scale 0.1 1.0] [--write]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dsv_platform.adapters.registry import lineage as reg_lineage
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.retention.gc import GcPolicy, StoredObject, plan_gc
from dsv_platform.services.retention import gc as gc_adapter

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=60)


class SyntheticStore:
    """The object-store calls GC inventory makes, over a synthetic listing (no files)."""

    def __init__(self, objects: list[tuple[str, int]]) -> None:
        self.objects = objects

    def iter_objects(self) -> Iterator[tuple[str, int]]:
        from dsv_platform.adapters.objects.object_store import ObjectInfo

        return (ObjectInfo(d, s) for d, s in self.objects)

    def list_staging(self) -> list[object]:
        return []

    def list_staged(self, attempt: str) -> list[object]:
        return []


def h(prefix: int, i: int) -> str:
    return format(prefix, "02x") + format(i, "062x")


def generate(path: Path, realizations: int, roots: int) -> tuple[list[tuple[str, int]], str]:
    Registry.from_url(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    ts = OLD.replace(tzinfo=None).isoformat(sep=" ")
    conn.executemany(
        "INSERT INTO dataset_definitions (name, version, contract_json, contract_hash, recipe_json, recipe_hash, owner, created_at, allowed_readers_json)"
        " VALUES (?,?,?,?,?,?,?,?, '[]')",
        [(f"ds{d}", "v1", "{}", "0" * 64, "{}", "0" * 64, "bench", ts) for d in range(10)],
    )
    objects: list[tuple[str, int]] = []
    real_rows, manifest_rows, claim_rows, edge_rows = [], [], [], []
    for i in range(realizations):
        mh = h(1, i)
        parts = []
        for j in range(10):
            digest = h(2, i * 10 + j) if j < 9 else h(3, i // 2)  # the 10th object shared by two neighbours
            if j < 9 or i % 2 == 0:
                objects.append((digest, 1000))
            parts.append({"key": f"p{j}", "hash": "0" * 64, "rows": 10, "object": digest, "bytes": 1000})
            edge_rows.append(("object", digest, "realization", mh, "part_of", ts, "{}"))
        doc: dict[str, object] = {"partitions": parts, "splits": None, "sources": [], "labels": None, "attachments": {}}
        ds = f"ds{i % 10}"
        real_rows.append((i + 1, ds, "v1", "PUBLISHED", f"req{i}", f"lk{i}", mh, ts, "bench", ts, ts))
        manifest_rows.append((mh, ds, "v1", json.dumps(doc), ts))
        claim_rows.append((i + 1, ds, "v1", f"lk{i}", mh, f"h{i}", f"pub{i}", (OLD + timedelta(seconds=i)).replace(tzinfo=None).isoformat(sep=" ")))
    conn.executemany(
        "INSERT INTO realizations (id, dataset, version, state, request_id, logical_key, manifest_hash, created_at, created_by, state_changed_at, published_at)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        real_rows,
    )
    conn.executemany("INSERT INTO manifests (manifest_hash, dataset, version, canonical_json, stored_at) VALUES (?,?,?,?,?)", manifest_rows)
    conn.executemany(
        "INSERT INTO publication_claims (realization_id, dataset, version, logical_key, manifest_hash, human_version, request_id, claimed_at)"
        " VALUES (?,?,?,?,?,?,?,?)",
        claim_rows,
    )
    root_rows = []
    step = max(1, realizations // roots)
    for k in range(roots):
        i = (k * step) % realizations
        run = h(4, k)
        if k % 2 == 0:  # a model version: model_run root, reached through lineage
            edge_rows.append(("realization", h(1, i), "model_run", run, "trained", ts, "{}"))
            root_rows.append(("model_version", f"model_run:{run}", "retained model", "ml", ts))
        else:
            root_rows.append(("legal_hold" if k % 3 else "report", f"ds{i % 10}:v1@sha256:{h(1, i)}", "hold/report", "legal", ts))
    conn.executemany("INSERT INTO lineage_edges (src_kind, src_id, dst_kind, dst_id, relation, recorded_at, attributes_json) VALUES (?,?,?,?,?,?,?)", edge_rows)
    conn.executemany("INSERT INTO retention_roots (kind, ref, reason, owner, created_at) VALUES (?,?,?,?,?)", root_rows)
    conn.commit()
    conn.close()
    return objects, h(3, 0)


def run(scale: float, workdir: Path) -> dict[str, float]:
    n_real, n_roots = int(100_000 * scale), int(10_000 * scale)
    path = workdir / f"gc_{scale}.db"
    t0 = time.perf_counter()
    objects, shared = generate(path, n_real, n_roots)
    gen = time.perf_counter() - t0
    reg = Registry.from_url(f"sqlite:///{path}")
    store = SyntheticStore(objects)
    t0 = time.perf_counter()
    inv = gc_adapter.collect_inventory(reg, store, now=NOW)  # type: ignore[arg-type]
    t_inv = time.perf_counter() - t0
    # Not timed: the synthetic listing has no modification times (a real store's listing does); every object is old.
    inv.objects = [StoredObject(o.digest, o.size, OLD) for o in inv.objects]
    gc.collect()  # the rebuild's garbage is not the plan's
    t0 = time.perf_counter()
    plan = plan_gc(inv, GcPolicy())
    t_plan = t_inv + time.perf_counter() - t0
    figures = plan.figures()
    t0 = time.perf_counter()
    with reg.engine.connect() as conn:
        graph = reg_lineage.walk_subgraph(conn, ("object", shared), direction="downstream")
    t_impact = time.perf_counter() - t0
    impacted = len(graph.nodes())
    reg.close()
    return {
        "realizations": n_real,
        "objects": len(objects),
        "roots": n_roots,
        "generate_s": round(gen, 1),
        "inventory_s": round(t_inv, 2),
        "plan_total_s": round(t_plan, 2),
        "impact_query_s": round(t_impact, 4),
        "impact_nodes": impacted,
        "kept_objects": figures.get("object.kept", 0),
        "collectable_objects": figures.get("object.collectable", 0),
    }


def write(results: list[dict[str, float]]) -> None:
    doc = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
    small, full = results[0], results[-1]
    lines = [
        "",
        "## GC and lineage",
        "",
        f"`python -m benchmarks.gc_bench --write` on {platform.platform()}, Python {platform.python_version()}, "
        "SQLite registry (bulk-inserted synthetic rows).",
        "Planning = reading the registry (realizations, manifests, roots, lineage, watermark) and the object listing, parsing every manifest,",
        "building the dependency graph, the multi-source walk from the roots and one decision per node. Impact = the SQL level-by-level walk",
        "downstream from one shared object (object -> realizations -> model runs).",
        "",
        "| realizations | objects | roots | inventory (s) | planning total (s) | impact query (s) | kept / collectable objects |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['realizations']:,} | {r['objects']:,} | {r['roots']:,} | {r['inventory_s']} | {r['plan_total_s']} | {r['impact_query_s']} "
            f"| {r['kept_objects']:,} / {r['collectable_objects']:,} |"
        )
    if len(results) > 1:
        lines += [
            "",
            f"Growth from {small['realizations']:,} to {full['realizations']:,} realizations ({full['realizations'] / small['realizations']:.0f}x): "
            f"planning x{full['plan_total_s'] / max(small['plan_total_s'], 1e-9):.1f}, "
            f"impact query x{full['impact_query_s'] / max(small['impact_query_s'], 1e-9):.1f}. "
            "Targets: planning under 20 s (issue 15; 60 s before), impact under 1 s at full size.",
        ]
    text = doc.read_text() if doc.exists() else ""
    marker = "\n## GC and lineage\n"
    if marker in text:  # replace only our own section (it runs to the next level-2 heading)
        head, _, rest = text.partition(marker)
        nxt = rest.find("\n## ")
        text = head + ("" if nxt < 0 else rest[nxt:])
    doc.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run(s, Path(tmp)) for s in args.scale]
    for r in results:
        print(json.dumps(r))
    if args.write:
        write(results)


if __name__ == "__main__":
    main()
