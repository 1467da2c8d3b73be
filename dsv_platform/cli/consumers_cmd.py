"""`dsv consumers add/list/remove`: who reads a definition, and which columns (the schema evolution gate)."""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.publication.consumers import add_consumer, list_consumers, remove_consumer


@with_platform
def _add(args: argparse.Namespace, platform: Platform) -> int:
    where, consumer = add_consumer(platform, args.definition, args.name, args.columns.split(","))
    doc = {"definition": where.partition(":")[0], "checked_against": where, "name": consumer.name, "columns": list(consumer.columns)}
    print(json.dumps(doc) if args.json else f"consumer {consumer.name} of {doc['definition']} reads {', '.join(consumer.columns)} (checked against {where})")
    return 0


@with_platform
def _list(args: argparse.Namespace, platform: Platform) -> int:
    rows = [{"definition": d, "name": c.name, "columns": list(c.columns)} for d, c in list_consumers(platform, args.definition)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no registered consumers" + (f" of {args.definition}" if args.definition else ""))
    for r in rows:
        print(f"{r['definition']:<24} {r['name']:<24} {', '.join(r['columns'])}")
    return 0


@with_platform
def _remove(args: argparse.Namespace, platform: Platform) -> int:
    remove_consumer(platform, args.definition, args.name)
    print(f"removed consumer {args.name} of {args.definition}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    consumers = sub.add_parser("consumers", help="register who reads a definition and which columns").add_subparsers(dest="consumers_command", metavar="ACTION")
    consumers.required = True
    p = consumers.add_parser("add", help="register (or update) a consumer; its columns must be in the definition's output contract")
    p.add_argument("definition", metavar="DEFINITION", help="NAME or NAME:VERSION (the columns are checked against it)")
    p.add_argument("--name", required=True, help="the consumer (a model, a report, a job)")
    p.add_argument("--columns", required=True, metavar="A,B,C", help="the columns it reads")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_add)
    p = consumers.add_parser("list", help="registered consumers, of one definition or all")
    p.add_argument("definition", metavar="DEFINITION", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)
    p = consumers.add_parser("remove", help="unregister a consumer (exit 3 when there is none)")
    p.add_argument("definition", metavar="DEFINITION")
    p.add_argument("--name", required=True)
    p.set_defaults(handler=_remove)
