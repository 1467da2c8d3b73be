"""`dsv approve REF --reason TEXT` and `dsv revoke REF --reason TEXT [--force]`: approval of realizations (services/publication/approval.py)."""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.publication.approval import ApprovalOutcome, approve, revoke
from dsv_platform.services.trust.trust import gatekeeper


def _print(done: ApprovalOutcome, as_json: bool) -> int:
    if as_json:
        print(json.dumps(done.to_document(), indent=2))
    else:
        print(f"{done.realization.ref}: {done.realization.state.value}; {done.note}")
    return 0


@with_platform
def _approve(args: argparse.Namespace, platform: Platform) -> int:
    return _print(approve(platform.registry, args.ref, reason=args.reason, actor=platform.actor, gate=gatekeeper(platform)), args.json)


@with_platform
def _revoke(args: argparse.Namespace, platform: Platform) -> int:
    return _print(revoke(platform.registry, args.ref, reason=args.reason, actor=platform.actor, force=args.force, gate=gatekeeper(platform)), args.json)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("approve", help="approve a PUBLISHED realization: it becomes ELIGIBLE (protected aliases may point only there)")
    p.add_argument("ref", metavar="REF", help="name:version, name:version@sha256:<hash> or name:version@<alias>")
    p.add_argument("--reason", required=True, help="why (recorded with the acting identity in the realization's events)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_approve)
    p = sub.add_parser("revoke", help="revoke an approval: ELIGIBLE -> PUBLISHED; refused while a protected alias points at it")
    p.add_argument("ref", metavar="REF", help="name:version, name:version@sha256:<hash> or name:version@<alias>")
    p.add_argument("--reason", required=True, help="why (recorded with the actor in the realization's events)")
    p.add_argument("--force", action="store_true", help="revoke even though protected aliases point at it (they keep pointing; dsv status shows it)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_revoke)
