"""`dsv audit [--since ISO] [--ref REF] [--verify [--against FILE]] [--export FILE] [--verify-export FILE] [--json]`: the audit log.

The log is hash-chained, each entry signed by its identity, the head checkpointed and signed (auditor; docs/trust.md).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dsv_platform.adapters.registry.certificates import load_root, verifies
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import AuditTamperedError, ConfigurationError, FileAccessError
from dsv_platform.core.trust import audit_seal
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.signing import verify_publication_heads
from dsv_platform.settings import load_settings


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


def _read_export(path: str) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise FileAccessError(f"{path}: cannot read the audit export ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{path}: not an audit export (not JSON: {exc})") from exc
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{path}: not an audit export (a JSON object expected)")
    return doc


def _verify(args: argparse.Namespace, platform: Platform) -> int:
    """The whole chain, every signature and checkpoint (a filtered view cannot prove anything), then the signed state."""
    summary = trust.records(platform).verify_audit()
    if args.against:
        problem = audit_seal.compare_with_export(trust.records(platform).audit_entries(), _read_export(args.against))
        if problem is not None:
            raise AuditTamperedError(f"the audit log does not verify against {args.against}: {problem}")
    checked = platform.registry.verify_signed_state()  # UNTRUSTED (exit 13) naming the first state or alias no signature backs
    heads = verify_publication_heads(platform)  # UNTRUSTED naming a publication whose signed audit head the log lost
    doc = {"verified": True, **summary, "signed_state": checked, "publication_heads": heads}
    sealed = f"; {summary['signed_entries']} signed entries, {summary['checkpoints']} signed checkpoint(s)"
    signed = f"; signed state of {checked['realizations']} realization(s) and {checked['aliases']} alias(es) verifies; {heads} publication head(s) in the log"
    print(json.dumps(doc, indent=2) if args.json else f"audit log verifies: {doc['entries']} entries, head {doc['head']}{sealed}{signed}")
    return 0


def _export(args: argparse.Namespace, platform: Platform) -> int:
    trust.current_identity(platform)  # proves the key: the export's fresh checkpoint is signed by this identity
    doc = trust.records(platform).checkpoint_and_export()
    try:
        Path(args.export).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise FileAccessError(f"{args.export}: cannot write the audit export ({exc.strerror})") from exc
    cp = doc["checkpoints"][-1] if doc["checkpoints"] else None
    head = f", checkpoint of entry {cp['seq']} signed by {cp['signer']!r}" if cp else ""
    print(json.dumps({"exported": args.export, "entries": len(doc["entries"]), "checkpoint": cp}, indent=2) if args.json
          else f"exported {len(doc['entries'])} audit entries to {args.export}{head}")  # fmt: skip
    return 0


def _verify_export(args: argparse.Namespace) -> int:
    """Offline: no registry; the keys must chain to the pinned root (DSV_TRUST_ROOT or the home's trust_root) when there is one."""
    settings = load_settings()
    root = load_root(settings.trust_root, settings.home)
    summary = audit_seal.verify_export(_read_export(args.verify_export), verifies, root=root)
    rooted = "keys chain to the trust root" if root is not None else "no trust root pinned: keys as the file gives them"
    line = f"audit export verifies: {summary['entries']} entries, head {summary['head']}, {summary['checkpoints']} signed checkpoint(s); {rooted}"
    print(json.dumps(summary | {"trust_root": root.hex() if root else None}, indent=2) if args.json else line)
    return 0


@with_platform
def _audit_of_registry(args: argparse.Namespace, platform: Platform) -> int:
    trust.require(platform, Role.AUDITOR)
    if args.verify:
        return _verify(args, platform)
    if args.export:
        return _export(args, platform)
    entries = trust.records(platform).audit_entries(since=_since(args.since), target=args.ref)
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for e in entries:
        print(_line(e))
    return 0


def _audit(args: argparse.Namespace) -> int:
    if args.against and not args.verify:
        raise ConfigurationError("--against FILE goes with --verify")
    return _verify_export(args) if args.verify_export else _audit_of_registry(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("audit", help="the audit log: grants, publications, approvals, alias moves, quarantines, deletions, GC; --verify checks the chain")
    p.add_argument("--since", help="entries at or after this ISO time")
    p.add_argument("--ref", help="entries about this target (a reference, or its name:version prefix)")
    p.add_argument(
        "--verify", action="store_true",
        help="check the chain (exit 2), each entry's signature and the signed checkpoints (exit 13), naming the first entry that does not fit",
    )  # fmt: skip
    p.add_argument("--against", metavar="FILE", help="with --verify: the registry's log must still hold every entry of this earlier export")
    p.add_argument("--export", metavar="FILE", help="sign a checkpoint of the head, then write the log, signatures, checkpoints and keys to FILE")
    p.add_argument("--verify-export", metavar="FILE", help="check an exported log offline, without the registry (exit 2 or 13)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_audit)
