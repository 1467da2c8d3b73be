"""`dsv privacy delete / status / close / reconcile`: erase a data subject, say what happened to everything built from it, govern its models."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.privacy.privacy import parse_legal_bases
from dsv_platform.services.privacy.governance import close_obligation
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
        + "".join(f"\n  model obligation {o['model_run'][:16]} ({o['family']}): {_policy(o)}" for o in report.obligations)
    )
    _print(doc, args.json, text)
    return 0


def _policy(o: dict[str, Any]) -> str:
    grace = f" {o['grace_days']}d" if o.get("grace_days") else ""
    due = f", due {o['due_at']}" if o.get("due_at") else ""
    return f"{o['policy']}{grace}{due} ({o['policy_source']})"


def _obligation_line(o: dict[str, Any]) -> str:
    line = f"  {o['state'].upper():8} model {o['model_run'][:16]} ({o['family']}), request {o['request_id']}: {_policy(o)}"
    d = o["decision"]
    if d is None:
        return f"{line}; closed by {o['closed_by']} (dsv privacy close --request-id {o['request_id']} --model {o['model_run'][:16]} ...)"
    evidence = f"retrained as {d['retrained_run'][:16]}" if d["retrained_run"] else "no longer served"
    return f"{line}; {evidence}, decided by {d['decided_by']} at {d['decided_at']}"


@with_platform
def _status(args: argparse.Namespace, platform: Platform) -> int:
    doc = _coordinator(platform).status(args.subject)
    state = "deleted" if doc["deleted"] else "not deleted"
    generations = f"generation registry {doc['registry_generation']} / key store {doc['key_store_generation']}"
    obligations = doc["model_obligations"]
    counts = ", ".join(f"{sum(o['state'] == s for o in obligations)} {s}" for s in ("open", "overdue", "closed"))
    text = f"subject {doc['subject_key_hash'][:16]}…: {state}; {len(doc['outcomes'])} outcome(s); {generations}; model obligations: {counts}"
    _print(doc, args.json, "\n".join([text, *map(_obligation_line, obligations)]))
    return 0


@with_platform
def _close(args: argparse.Namespace, platform: Platform) -> int:
    coordinator = _coordinator(platform)
    known = coordinator.registry.privacy.requests(coordinator.subject_hash(args.subject) if args.subject else None)
    requests = [r for r in known if args.request_id is None or r.request_id == args.request_id]
    if not requests:
        named = f"request {args.request_id!r}" if args.request_id else "this subject"
        raise NotFoundError(f"no privacy deletion of {named}: `dsv privacy status --subject <key>` lists them", ref=args.request_id or "subject")
    doc = close_obligation(coordinator, requests, args.model, retrained=args.retrained_by, not_served=args.not_served, reason=args.reason)
    _print(doc, args.json, "closed:\n" + _obligation_line(doc))
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
        f"re-deleted {sum(e['rows'] for e in report.canonical_rows)} canonical row(s) of deleted subjects a restored warehouse held"
        f" ({len(report.canonical_checked)} table(s) checked); "
        f"registry generation {report.registry_generation}"
        + "".join(f"\n  {e['table']}: {e['rows']} row(s) of subject {e['subject_key_hash'][:16]}… (request {e['request_id']})" for e in report.canonical_rows)
        + "".join(f"\n  request {r}: lost by the restored registry, checked from the key store's record" for r in report.canonical_lost_requests)
        + "".join(
            f"\n  UNCHECKED deletion at generation {g}: lost by the restored registry and not recorded in the key store; "
            "rerun `dsv privacy delete --subject <key>` for its subject"
            for g in report.canonical_unchecked_generations
        ),
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
    p = privacy.add_parser("close", help="close a model obligation of a deletion: with the retrained model's run, or a decision it is no longer served")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--subject", help="the subject key of the deletion")
    which.add_argument("--request-id", help="the deletion request (`dsv privacy status` shows it)")
    p.add_argument("--model", required=True, help="the affected model's run manifest hash (or a unique prefix)")
    evidence = p.add_mutually_exclusive_group(required=True)
    evidence.add_argument("--retrained-by", metavar="RUN", help="run manifest hash of the model of the same family retrained without the subject")
    evidence.add_argument("--not-served", action="store_true", help="record that the model is no longer served (the stop_serving policy)")
    p.add_argument("--reason", help="why, recorded with the decision")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_close)
    p = privacy.add_parser("reconcile", help="re-apply deletions after a restored backup (key store, registry, warehouse), finish interrupted ones")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_reconcile)
