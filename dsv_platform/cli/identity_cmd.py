"""`dsv identity create|list|show`, `dsv init [--strict]` and `dsv trust certify`: identities, their keys, strict homes (docs/trust.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dsv_platform.adapters.registry.signed_events import policy_of
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import AccessDeniedError, ConfigurationError
from dsv_platform.core.trust.trust import Grant, Role
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.keys import keygen, parse_public_key
from dsv_platform.settings import load_settings


@with_platform
def _create(args: argparse.Namespace, platform: Platform) -> int:
    """Register an identity: with ``--public-key``, the key its holder generated (``dsv identity keygen``); without, a key pair here."""
    trust.check_identity_name(args.name)
    trust.require(platform, Role.OPERATOR)  # identities are created by an operator (the bootstrap admin in a non-strict home)
    by = trust.current_identity(platform).name
    if args.public_key is not None:
        identity, created = trust.register_identity(platform, args.name, _public_key_arg(args.public_key), by=by)
        where = None
    else:  # the embedded default: the key pair in this key folder
        identity, created = trust.create_identity(platform, args.name, by=by)
        where = str(trust.key_path(platform, args.name))
    doc = {"identity": identity.name, "fingerprint": identity.fingerprint, "created": created, "private_key": where}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        held = f"; private key {where}" if where else "; its private key stays with its holder"
        print(f"identity {identity.name}: {identity.fingerprint}" + ("" if created else " (existed)") + held)
    return 0


def _public_key_arg(value: str) -> bytes:
    """``--public-key``: ``-`` (stdin), a file holding the key, or the key itself (what ``dsv identity keygen`` prints)."""
    if value == "-":
        return parse_public_key(sys.stdin.read(), what="--public-key - (stdin)")
    path = Path(value)
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"--public-key {path}: cannot read ({exc})") from exc
        return parse_public_key(text, what=f"--public-key {path}")
    return parse_public_key(value, what="--public-key")


def _keygen(args: argparse.Namespace) -> int:
    """The holder's side: a key pair in this process's key folder (DSV_KEY_DIR); prints the public key to hand to an operator."""
    key_dir = load_settings().identity_key_dir
    public, path, created = keygen(key_dir, args.name)
    text = f"ed25519:{public.hex()}"
    if args.json:
        print(json.dumps({"identity": args.name, "public_key": text, "fingerprint": trust.fingerprint(public), "created": created, "private_key": str(path)}))
        return 0
    print(text)  # stdout holds only the public key: dsv identity keygen NAME > NAME.pub
    note = "" if created else " (existed: the key already in the folder)"
    print(f"identity {args.name}: fingerprint {trust.fingerprint(public)}, private key {path}{note}", file=sys.stderr)
    print(f"an operator registers it: dsv identity create {args.name} --public-key {args.name}.pub", file=sys.stderr)
    return 0


@with_platform
def _list(args: argparse.Namespace, platform: Platform) -> int:
    trust.current_identity(platform)  # a strict home answers only to a known identity
    records = trust.records(platform)
    docs = [
        {"identity": r.name, "fingerprint": r.fingerprint, "created_by": r.created_by, "roles": sorted({g.role.value for g in records.grants(r.name)})}
        for r in records.identities()
    ]
    if args.json:
        print(json.dumps(docs, indent=2))
        return 0
    for d in docs:
        print(f"{d['identity']:<24} {d['fingerprint']}  roles: {', '.join(d['roles']) or '-'}")
    return 0


@with_platform
def _show(args: argparse.Namespace, platform: Platform) -> int:
    me = trust.current_identity(platform)
    grants = trust.grants_of(platform, me.name)
    doc = {"identity": me.name, "fingerprint": me.fingerprint, "strict": trust.is_strict(platform), "grants": [g.to_document() for g in grants]}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"identity {me.name}: {me.fingerprint}{' (strict home)' if doc['strict'] else ''}")
    for g in grants:
        print(f"  {g.role.value:<16} {g.scope}")
    return 0


@with_platform
def _init(args: argparse.Namespace, platform: Platform) -> int:
    """A non-strict home bootstraps ``admin`` (every role); ``--strict`` marks the home and creates ``--admin`` with operator only."""
    settings = platform.settings
    if not args.strict:
        me = trust.current_identity(platform)
        print(f"home {settings.home}: identity {me.name} ({me.fingerprint}){' (strict home)' if trust.is_strict(platform) else ''}")
        return 0
    name = trust.check_identity_name(args.admin)
    first = not trust.records(platform).identities()
    if not first:  # a registry with identities: only an operator may make a home strict and name its admin
        trust.require(platform, Role.OPERATOR)
    trust.mark_strict(platform)
    identity, created = trust.create_identity(platform, name, by=name)
    if created:
        if first:  # the registry's first identity: its key is the trust root this home pins, and it certifies its own grant
            trust.enlist_signer(platform, name)
            trust.pin_home_root(platform, identity.public_key)
        trust.records(platform).change_grant(Grant(name, Role.OPERATOR), add=True, by=name, reason="dsv init --strict")
    print(f"strict home {settings.home}: operator {name} ({identity.fingerprint}); grant every other role explicitly: dsv grants add")
    return 0


@with_platform
def _certify(args: argparse.Namespace, platform: Platform) -> int:
    """The holder of the pinned trust root certifies every key and grant as they are now (a registry from before certificates)."""
    me = trust.current_identity(platform)
    root = policy_of(platform.registry.engine).root
    if root is None:
        raise ConfigurationError("no trust root is pinned: set DSV_TRUST_ROOT to the root identity's public key (docs/trust.md)")
    if me.public_key != root:
        raise AccessDeniedError(f"identity {me.name!r} does not hold the pinned trust root ({trust.fingerprint(root)}); only its holder certifies every row")
    done = trust.records(platform).certify_all(by=me.name)
    print(json.dumps({"certified": done, "by": me.name}) if args.json else f"certified {done} key(s) and grant(s) as {me.name} (audited: trust.certify)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("identity", help="identities and their Ed25519 keys: create, list, show (the current one)")
    s = p.add_subparsers(dest="identity_command", metavar="SUBCOMMAND")
    s.required = True
    c = s.add_parser("keygen", help="the holder's side: a key pair in your own key folder (DSV_KEY_DIR); prints the public key to register")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_keygen)
    c = s.add_parser("create", help="register an identity (operator): --public-key its holder's key (dsv identity keygen), else a key pair here")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--public-key", metavar="FILE|-|KEY", help="the public key the holder's dsv identity keygen printed: a file, - for stdin, or the key")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_create)
    c = s.add_parser("list", help="registered identities with fingerprints and roles")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_list)
    c = s.add_parser("show", help="the identity this command runs as (DSV_IDENTITY) and its grants")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_show)
    p = sub.add_parser("trust", help="the trust root: certify every key and grant of a registry from before certificates (the root's holder)")
    s = p.add_subparsers(dest="trust_command", metavar="SUBCOMMAND")
    s.required = True
    c = s.add_parser("certify", help="certify every identity key and grant as they are now, as the holder of the pinned trust root (DSV_TRUST_ROOT)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_certify)
    p = sub.add_parser("init", help="set up the home: bootstrap admin, or --strict: explicit grants only, --admin NAME holds operator")
    p.add_argument("--strict", action="store_true", help="no bootstrap identity; every action needs an explicit grant")
    p.add_argument("--admin", default=trust.ADMIN, help="the strict home's first identity, holding only operator (default admin)")
    p.set_defaults(handler=_init)
