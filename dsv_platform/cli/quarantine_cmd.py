"""`dsv quarantine REF --reason TEXT` (or `--list`) and `dsv release REF --reason TEXT [--approve]` (services/publication/quarantine.py)."""

from __future__ import annotations

import argparse
import json

from dsv_platform.adapters.registry.quarantine import QuarantineRecord
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.services.publication.quarantine import quarantine, quarantines, release

REF_HELP = "name:version[@sha256:<hash>|@<alias>], raw_batch:<batch id> (every revision), raw_batch:<batch id>@<digest> (one) or raw:<source>/<batch id>"


def _lines(record: QuarantineRecord) -> list[str]:
    held = [a for a in record.affected if a.get("quarantined")]
    out = [f"quarantine #{record.id} of {record.ref} ({record.state}) by {record.created_by}: {record.reason}"]
    out.append(f"  {len(held)} realization(s) quarantined; {len(record.affected)} descendant(s):")
    for a in record.affected:
        state = " QUARANTINED" if a.get("quarantined") else (f" {a['state']}" if a.get("state") else "")
        out.append(f"    {a['node']}{' ' + str(a['ref']) if a.get('ref') else ''}{state}")
    findings = record.evidence.get("integrity_findings") or {}
    for mh, failed in sorted(findings.items()):
        out.append(f"  integrity signals of {mh[:16]}: {', '.join(str(g['name']) for g in failed)}")
    return out


@with_platform
def _quarantine(args: argparse.Namespace, platform: Platform) -> int:
    if args.list:
        found = quarantines(platform, active_only=not args.all)
        if args.json:
            print(json.dumps([r.to_document() for r in found], indent=2))
        for r in [] if args.json else found:
            print("\n".join(_lines(r)))
        if not found and not args.json:
            print("no quarantines" + ("" if args.all else " in force (--all: released ones too)"))
        return 0
    if not args.ref or not args.reason:
        raise ConfigurationError("dsv quarantine REF --reason TEXT (or --list)")
    record = quarantine(platform, args.ref, reason=args.reason)
    print(json.dumps(record.to_document(), indent=2) if args.json else "\n".join(_lines(record)))
    return 0


@with_platform
def _release(args: argparse.Namespace, platform: Platform) -> int:
    done = release(platform, args.ref, reason=args.reason, approve=args.approve)
    if args.json:
        print(json.dumps(done.to_document(), indent=2))
    elif done.step == "requested":
        print(f"release of quarantine #{done.record.id} ({done.record.ref}) requested; another identity approves it: dsv release REF --approve")
    else:
        back = ", ".join(done.released) or "none"
        print(f"quarantine #{done.record.id} ({done.record.ref}) released; back to PUBLISHED: {back}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("quarantine", help="quarantine a realization or a raw batch and every descendant (operator); --list shows quarantines")
    p.add_argument("ref", metavar="REF", nargs="?", help=REF_HELP)
    p.add_argument("--reason", help="why (kept in the quarantine record and the audit log)")
    p.add_argument("--list", action="store_true", help="list the quarantines not released (with --all: every one)")
    p.add_argument("--all", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_quarantine)
    p = sub.add_parser("release", help="release a quarantine: one operator requests it, another identity approves it (--approve)")
    p.add_argument("ref", metavar="REF", help=REF_HELP)
    p.add_argument("--reason", required=True, help="why (kept with the release and in the audit log)")
    p.add_argument("--approve", action="store_true", help="approve the pending release (an operator or approver other than the requester)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_release)
