"""`dsv audit [--since ISO] [--ref REF] [--verify] [--json]`: the hash-chained audit log (auditor; docs/trust.md)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import AuditChainError, ConfigurationError
from dsv_platform.core.trust.trust import Role, verify_chain
from dsv_platform.services.trust import trust


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"--since: not an ISO time: {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _line(e: dict[str, object]) -> str:
    reason = f"  ({e['reason']})" if e.get("reason") else ""
    detail = e.get("detail") or {}
    shown = {k: v for k, v in detail.items() if v not in (None, [], "")} if isinstance(detail, dict) else detail
    extra = f"  {json.dumps(shown, sort_keys=True)[:200]}" if shown else ""
    return f"#{e['seq']:<5} {str(e['at'])[:19]}  {e['identity']:<16} {e['action']:<16} {e['target']}{reason}{extra}"


@with_platform
def _audit(args: argparse.Namespace, platform: Platform) -> int:
    trust.require(platform, Role.AUDITOR)
    records = trust.records(platform)
    if args.verify:  # always the whole chain: a filtered view cannot prove anything
        entries = records.audit_entries()
        breaks = verify_chain(entries)
        if breaks:
            raise AuditChainError(f"the audit log does not verify: {breaks[0]}")
        checked = platform.registry.verify_signed_state()  # UNTRUSTED (exit 13) naming the first state or alias no signature backs
        doc = {"verified": True, "entries": len(entries), "head": entries[-1]["entry_hash"] if entries else None, "signed_state": checked}
        signed = f"; signed state of {checked['realizations']} realization(s) and {checked['aliases']} alias(es) verifies"
        print(json.dumps(doc, indent=2) if args.json else f"audit log verifies: {doc['entries']} entries, head {doc['head']}{signed}")
        return 0
    entries = records.audit_entries(since=_since(args.since), target=args.ref)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for e in entries:
        print(_line(e))
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("audit", help="the audit log: grants, publications, approvals, alias moves, quarantines, deletions, GC; --verify checks the chain")
    p.add_argument("--since", help="entries at or after this ISO time")
    p.add_argument("--ref", help="entries about this target (a reference, or its name:version prefix)")
    p.add_argument("--verify", action="store_true", help="check the hash chain; exit 2 naming the first broken entry")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_audit)
