"""`dsv schema diff OLD NEW [--definition NAME] [--json]`: every change between two contracts, classified.

Exit 0 when compatible, BREAKING's exit code (core/publication/failures.py) when breaking (docs/schema-evolution.md). A file may be a contract,
a source file or a dataset definition (its output contract).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from dsv_platform.core.config.source import SOURCE_KEYS
from dsv_platform.core.config_yaml import read_yaml
from dsv_platform.core.contracts.contract import Contract, load_contract, parse_contract
from dsv_platform.core.contracts.schema_diff import Consumer, SchemaDiff, diff_contracts
from dsv_platform.core.errors import FailureKind
from dsv_platform.core.publication.failures import exit_code


def load_any_contract(path: str | Path) -> Contract:
    """The contract of a contract file, a source file (its source keys set aside) or a dataset definition (its output contract)."""
    path = Path(path)
    doc = read_yaml(path)
    if isinstance(doc, dict) and isinstance(doc.get("contract"), dict):
        return parse_contract(doc["contract"], source=str(path))
    if isinstance(doc, dict) and set(doc) & SOURCE_KEYS:
        return parse_contract({k: v for k, v in doc.items() if k not in SOURCE_KEYS}, source=str(path))
    return load_contract(path)


def _consumers(definition: str | None) -> Sequence[Consumer]:
    if definition is None:
        return ()
    from dsv_platform.cli.context import open_platform
    from dsv_platform.services.publication.consumers import registered_consumers

    with open_platform() as platform:
        return registered_consumers(platform, definition)


def render(diff: SchemaDiff, title: str) -> str:
    lines = [f"{title}: {diff.verdict.upper()}"]
    if not diff.changes:
        lines.append("  no changes")
    lines += [f"  {c.describe()}" for c in diff.changes]
    for verdict in diff.consumers:
        why = "; ".join(c.describe() for c in verdict.broken_by)
        lines.append(f"  consumer {verdict.name} (reads {', '.join(verdict.columns)}): {verdict.verdict}{f' by {why}' if why else ''}")
    return "\n".join(lines)


def _diff(args: argparse.Namespace) -> int:
    old, new = load_any_contract(args.old), load_any_contract(args.new)
    diff = diff_contracts(old, new, _consumers(args.definition))
    if args.json:
        print(json.dumps(diff.to_document(), indent=2, default=str))
    else:
        print(render(diff, f"schema diff {args.old} -> {args.new}"))
    return exit_code(FailureKind.BREAKING) if diff.verdict == "breaking" else 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    schema = sub.add_parser("schema", help="schema evolution: classify the changes between two contracts").add_subparsers(
        dest="schema_command", metavar="ACTION"
    )
    schema.required = True
    p = schema.add_parser("diff", help=f"classify every change from OLD to NEW (exit 0 compatible, {exit_code(FailureKind.BREAKING)} breaking)")
    p.add_argument("old", metavar="OLD_CONTRACT")
    p.add_argument("new", metavar="NEW_CONTRACT")
    p.add_argument("--definition", metavar="NAME", help="give a verdict for each consumer registered on this definition name")
    p.add_argument("--json", action="store_true", help="one object {verdict, changes, consumers}")
    p.set_defaults(handler=_diff)
