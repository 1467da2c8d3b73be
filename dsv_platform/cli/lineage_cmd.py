"""`dsv lineage REF-or-ID [--impact] [--json]`: provenance or impact from the recorded lineage."""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.lineage import lineage


@with_platform
def _lineage(args: argparse.Namespace, platform: Platform) -> int:
    doc = lineage(platform, args.query, impact=args.impact)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{doc['direction']} of {', '.join(doc['start'])}")
    for n in doc["nodes"]:
        state = f"  [{n['state']}]" if "state" in n else ""
        via = f"  <-{n['relation']}- {n['via']}" if n["via"] and not args.impact else (f"  -{n['relation']}-> from {n['via']}" if n["via"] else "")
        print(f"{'  ' * n['depth']}{n['node']}{state}{via}")
    for a in doc["aliases"]:
        print(f"alias {a['alias']} -> {a['target']}")
    for r in doc["retention_roots"]:
        print(f"retention root #{r['id']} {r['kind']} {r['ref']} (owner {r['owner']}: {r['reason']})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lineage", help="provenance of a model, report or realization; --impact: everything depending on a node")
    p.add_argument(
        "query",
        metavar="REF-or-ID",
        help="NAME:VER[@...], KIND:ID (model_run:<hash>, raw_batch:<id@digest>, iceberg_snapshot:<table@id>, label_version:<name@ver>) or a bare id",
    )
    p.add_argument("--impact", action="store_true", help="walk downstream instead of upstream")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_lineage)
