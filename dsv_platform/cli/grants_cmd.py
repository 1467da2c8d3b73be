"""`dsv grants add|remove|list`: who may act in which role, on what (docs/trust.md). Changes need operator and are audited."""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.trust.trust import Grant, columns_of, parse_role
from dsv_platform.services.trust import trust


def _grant(args: argparse.Namespace) -> Grant:
    return Grant(
        identity=trust.check_identity_name(args.identity),
        role=parse_role(args.role),
        definition=args.definition or None,
        source=args.source or None,
        purpose=args.purpose or None,
        columns=columns_of(args.columns),
    )


def _change(args: argparse.Namespace, platform: Platform, *, add: bool) -> int:
    grant = _grant(args)
    changed = trust.change_grant(platform, grant, add=add, reason=args.reason)
    verb = "added" if add else "removed"
    if args.json:
        print(json.dumps({"action": "grant.add" if add else "grant.remove", "changed": changed, "grant": grant.to_document()}, indent=2))
    else:
        print(
            f"grant {verb}: {grant.identity} {grant.role.value} ({grant.scope})"
            if changed
            else f"nothing to do: {grant.identity} {grant.role.value} ({grant.scope})"
        )
    return 0


@with_platform
def _add(args: argparse.Namespace, platform: Platform) -> int:
    return _change(args, platform, add=True)


@with_platform
def _remove(args: argparse.Namespace, platform: Platform) -> int:
    return _change(args, platform, add=False)


@with_platform
def _list(args: argparse.Namespace, platform: Platform) -> int:
    trust.current_identity(platform)  # a strict home answers only to a known identity
    role = parse_role(args.role) if args.role else None
    grants = [g for g in trust.records(platform).grants(args.identity) if role is None or g.role is role]
    if args.json:
        print(json.dumps([g.to_document() for g in grants], indent=2))
        return 0
    for g in grants:
        print(f"{g.identity:<24} {g.role.value:<16} {g.scope}")
    return 0


def _scope(p: argparse.ArgumentParser) -> None:
    p.add_argument("identity", metavar="IDENTITY")
    p.add_argument("role", metavar="ROLE", help="source_writer, builder, publisher, approver, consumer, auditor, privacy_officer, operator")
    p.add_argument("--definition", help="a dataset name (every version) or NAME:VERSION; default any")
    p.add_argument("--source", help="a source name (source_writer); default any")
    p.add_argument("--purpose", help="a purpose (consumer); default any")
    p.add_argument("--columns", help="restricted columns this grant may see, comma-separated (consumer)")
    p.add_argument("--reason", help="why (kept in the audit log)")
    p.add_argument("--json", action="store_true")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("grants", help="grant or remove a role (operator; audited), or list the grants")
    s = p.add_subparsers(dest="grants_command", metavar="SUBCOMMAND")
    s.required = True
    c = s.add_parser("add", help="give IDENTITY the role ROLE within the scope the options name")
    _scope(c)
    c.set_defaults(handler=_add)
    c = s.add_parser("remove", help="remove exactly that grant (same identity, role and scope)")
    _scope(c)
    c.set_defaults(handler=_remove)
    c = s.add_parser("list", help="grants, of one identity and role when named")
    c.add_argument("identity", metavar="IDENTITY", nargs="?")
    c.add_argument("role", metavar="ROLE", nargs="?")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_list)
