"""`dsv model list|approve|revoke|alias set|alias history`: the model registry (deployments: deploy_cmd.py).

MODEL_REF: NAME@sha256:<run hash>, NAME@ALIAS, model_run:<run hash>, or a run hash (a unique prefix of
>= 12 hex). ``dsv model alias set NAME@ALIAS MODEL_REF [--expect OLD]`` moves an alias by compare-and-swap, as
``dsv alias set`` does for datasets (omit --expect when creating). Every command takes --json.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform

REF_HELP = "NAME@sha256:<run hash>, NAME@ALIAS, model_run:<run hash>, or a run hash (a unique prefix of >= 12 hex)"


def print_doc(args: argparse.Namespace, doc: Any, text: str) -> int:
    print(json.dumps(doc, indent=2) if args.json else text)
    return 0


@with_platform
def _list(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.model_registry import list_models

    rows = list_models(platform, model=args.model)
    if args.json:
        return print_doc(args, rows, "")
    for v in rows:
        aliases = f"  @{' @'.join(v['aliases'])}" if v["aliases"] else ""
        print(f"{v['ref']}  {v['state']}{aliases}  trained on {v['trained_on']} by {v['trained_by']}")
        for d in v["deployments"]:
            print(f"  {'serving' if d['current'] else 'served '} on {d['target']} since {d['at'][:19]} (recorded by {d['actor']})")
    if not rows:
        print("no model versions (a complete model run is one: services/reproduction/model_run.py)")
    return 0


@with_platform
def _approve(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.model_registry import approve_model, revoke_model

    if args.model_command == "approve":
        done = approve_model(platform, args.ref, reason=args.reason)
    else:
        done = revoke_model(platform, args.ref, reason=args.reason, force=args.force)
    doc = done.to_document()
    note = "" if done.changed else " (nothing to change; nothing recorded)"
    return print_doc(args, doc, f"{doc['ref']}: {doc['state']}{note}")


@with_platform
def _alias_set(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.model_registry import set_model_alias

    moved = set_model_alias(platform, args.alias, args.ref, expect=args.expect, reason=args.reason or "")
    return print_doc(args, moved.to_document(), f"{moved.ref} -> {moved.run_hash} (generation {moved.generation})")


@with_platform
def _alias_history(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.model_registry import model_alias_history

    moves = model_alias_history(platform, args.alias)
    lines = [f"#{m['generation']:<3} {m['at'][:19]}  {m['old_target'] or '(created)'} -> {m['new_target']}  by {m['actor']}  {m['reason']}" for m in moves]
    return print_doc(args, moves, "\n".join(lines) or f"{args.alias}: never set")


def _model_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    model = sub.add_parser("model", help="the model registry: versions (run manifest hashes), approvals, aliases").add_subparsers(
        dest="model_command", metavar="ACTION"
    )
    model.required = True
    p = model.add_parser("list", help="model versions, newest first, with their state, aliases and deployments")
    p.add_argument("--model", metavar="NAME", help="only this model's versions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_list)
    for action, text in (("approve", "PUBLISHED -> ELIGIBLE (protected model aliases may point only there)"), ("revoke", "ELIGIBLE -> PUBLISHED")):
        p = model.add_parser(action, help=text)
        p.add_argument("ref", metavar="MODEL_REF", help=REF_HELP)
        p.add_argument("--reason", required=True, help="why (one line, recorded with the event and audited)")
        if action == "revoke":
            p.add_argument("--force", action="store_true", help="revoke even while a protected alias points at it")
        p.add_argument("--json", action="store_true")
        p.set_defaults(handler=_approve)
    alias = model.add_parser("alias", help="move or inspect a model alias").add_subparsers(dest="alias_command", metavar="ACTION")
    alias.required = True
    p = alias.add_parser("set", help="point NAME@ALIAS at a model version, by compare-and-swap")
    p.add_argument("alias", metavar="NAME@ALIAS")
    p.add_argument("ref", metavar="MODEL_REF", help=REF_HELP)
    p.add_argument("--expect", metavar="OLD", help="the version the alias points at now (a MODEL_REF); refused if it has moved (omit when creating)")
    p.add_argument("--reason")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_alias_set)
    p = alias.add_parser("history", help="every move of a model alias")
    p.add_argument("alias", metavar="NAME@ALIAS")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_alias_history)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _model_parser(sub)
