"""`dsv lineage REF-or-ID [--impact] [--json]`: provenance or impact from the recorded lineage, with runs, activities, models and deployments."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.lineage.lineage import lineage


def _node_line(n: Mapping[str, Any], impact: bool) -> str:
    state = f"  [{n['state']}]" if "state" in n else ""
    name = f"  {n['name']}" if "name" in n else ""
    via = f"  <-{n['relation']}- {n['via']}" if n["via"] and not impact else (f"  -{n['relation']}-> from {n['via']}" if n["via"] else "")
    return f"{'  ' * n['depth']}{n['node']}{name}{state}{via}"


def _summary(nodes: list[Mapping[str, Any]]) -> str:
    """``N nodes: 1 realization, 34 object, ...; deepest K``: what the walk reached, before the nodes themselves."""
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n["kind"]] = counts.get(n["kind"], 0) + 1
    kinds = ", ".join(f"{c} {k}" for k, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    deepest = max((n["depth"] for n in nodes), default=0)
    return f"{len(nodes)} node(s): {kinds}; {deepest} step(s) deep"


def _artifact_lines(n: Mapping[str, Any]) -> list[str]:
    pad = "  " * (n["depth"] + 1)
    out = [f"{pad}produced at {n['produced_at']}"] if n.get("produced_at") else []
    for i in n.get("inputs") or ():
        out.append(f"{pad}input {i['dataset']} as {i['ref']}: realization {i['snapshot_id']} (dataset hash {i['dataset_hash']})")
    out += [f"{pad}file {name}: object {digest}" for name, digest in sorted((n.get("files") or {}).items())]
    return out


@with_platform
def _lineage(args: argparse.Namespace, platform: Platform) -> int:
    doc = lineage(platform, args.query, impact=args.impact)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{doc['direction']} of {', '.join(doc['start'])}")
    print(f"  {_summary(doc['nodes'])}")
    shown = [n for n in doc["nodes"] if args.depth is None or n["depth"] <= args.depth]
    objects = [n for n in shown if n["kind"] == "object" and n["depth"] > 0]
    for n in shown:
        if n in objects and not args.objects:
            continue
        print(_node_line(n, args.impact))
        if n["kind"] == "artifact":
            for line in _artifact_lines(n):
                print(line)
    if objects and not args.objects:
        print(f"  ({len(objects)} object(s) not listed: --objects lists them, --json has everything)")
    for a in doc["aliases"]:
        print(f"alias {a['alias']} -> {a['target']}")
    for r in doc["retention_roots"]:
        print(f"retention root #{r['id']} {r['kind']} {r['ref']} (owner {r['owner']}: {r['reason']})")
    for run in doc["runs"]:
        what = run["manifest_hash"] or (run["error"] or "no manifest: never produced")
        print(f"run #{run['id']} {run['kind']} {run['name']} [{run['state']}] started {run['started_at']} by {run['actor']}: {what}")
    for a in doc["activities"]:
        record = a["record"]
        outcome = f" outcome {record['outcome']}" if isinstance(record, Mapping) and "outcome" in record else ""
        print(f"activity #{a['id']} {a['kind']} on {a['node']} at {a['recorded_at']} by {a['actor']}{outcome}")
    for line in _model_lines(doc):
        print(line)
    return 0


def _model_lines(doc: Mapping[str, Any]) -> list[str]:
    """The models reached (state, aliases) and the deployments that served them (current or replaced)."""
    out = []
    for m in doc.get("models", ()):
        aliases = f", aliases {', '.join(m['aliases'])}" if m["aliases"] else ""
        out.append(f"model {m['ref']} [{m['state'] or 'not registered'}{aliases}]: {len(m['deployments'])} deployment(s)")
    for d in doc.get("deployments", ()):
        now = "serving now" if d["current"] else "replaced since"
        out.append(f"deployment on {d['target']}: {d['ref']} recorded by {d['actor']} at {d['at']} ({now})")
    return out


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lineage", help="provenance of a model, report or realization; --impact: everything depending on a node")
    p.add_argument(
        "query",
        metavar="REF-or-ID",
        help="NAME:VER[@...], KIND:ID (model_run:<hash>, artifact:<hash, footer prefix or name>, raw_batch:<id@digest>, "
        "iceberg_snapshot:<table@id>, label_version:<name@ver>, deployment:<target@run hash>), a model MODEL@ALIAS or MODEL@sha256:<run hash>, "
        "an artifact name or footer hash, or a bare id",
    )
    p.add_argument("--impact", action="store_true", help="walk downstream instead of upstream")
    p.add_argument("--depth", type=int, metavar="N", help="list only the nodes at most N steps from the start (the summary counts all)")
    p.add_argument("--objects", action="store_true", help="list every stored object too (they are counted, not listed, by default)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_lineage)
