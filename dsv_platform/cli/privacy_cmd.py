"""`dsv privacy delete / status / reconcile`: erase a data subject, and say what happened to everything built from it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.privacy.privacy import parse_legal_bases
from dsv_platform.services.privacy.privacy import PrivacyCoordinator, build_coordinator


def _coordinator(platform: Platform) -> PrivacyCoordinator:
    return build_coordinator(platform)


def _print(doc: dict[str, Any], as_json: bool, text: str) -> None:
    print(json.dumps(doc, indent=2, default=str) if as_json else text)


@with_platform
def _delete(args: argparse.Namespace, platform: Platform) -> int:
    coordinator = _coordinator(platform)
    report = coordinator.delete(args.subject, args.reason, retain=parse_legal_bases(args.legal_basis), apply=not args.dry_run, request_id=args.request_id)
    doc = report.to_document()
    counts: dict[str, int] = {}
    for o in doc["outcomes"]:
        counts[o["outcome"]] = counts.get(o["outcome"], 0) + 1
    verb = "planned" if args.dry_run else "applied"
    text = (
        f"{verb} deletion {report.request_id} at redaction generation {report.generation}: "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + f"; {len(doc['affected_realizations'])} realization(s) REDACTED; {len(report.models)} model link(s) listed for governance"
    )
    _print(doc, args.json, text)
    return 0


@with_platform
def _status(args: argparse.Namespace, platform: Platform) -> int:
    doc = _coordinator(platform).status(args.subject)
    state = "deleted" if doc["deleted"] else "not deleted"
    generations = f"generation registry {doc['registry_generation']} / key store {doc['key_store_generation']}"
    text = f"subject {doc['subject_key_hash'][:16]}…: {state}; {len(doc['outcomes'])} outcome(s); {generations}"
    _print(doc, args.json, text)
    return 0


@with_platform
def _reconcile(args: argparse.Namespace, platform: Platform) -> int:
    report = _coordinator(platform).reconcile()
    doc = report.to_document()
    _print(
        doc,
        args.json,
        f"reconciled: re-applied {len(report.reapplied)} erasure(s), redacted {len(report.redacted)} realization(s), "
        f"finished {len(report.finished)} interrupted deletion(s); "
        f"registry generation {report.registry_generation}",
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    privacy = sub.add_parser("privacy", help="privacy deletion of a data subject").add_subparsers(dest="privacy_command", metavar="ACTION")
    privacy.required = True
    p = privacy.add_parser("delete", help="erase a subject from every realization and object built from it")
    subject_help = "the subject key (the value of the sources' entity column, e.g. a patient or account id); kept only as a salted hash"
    p.add_argument("--subject", required=True, help=subject_help)
    p.add_argument("--reason", required=True, help="why, e.g. 'GDPR art. 17 request #123'")
    p.add_argument("--legal-basis", action="append", default=[], metavar="KIND=BASIS", help="retain descendants of KIND under BASIS (repeatable)")
    p.add_argument("--request-id", help="idempotency key (default: derived from the subject)")
    p.add_argument("--dry-run", action="store_true", help="print the plan without changing anything")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_delete)
    p = privacy.add_parser("status", help="what deletions a subject has had and their outcomes")
    p.add_argument("--subject", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_status)
    p = privacy.add_parser("reconcile", help="re-apply recorded deletions after a restored backup, and finish deletions a crash interrupted")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_reconcile)
