"""`dsv audit [--since ISO] [--ref REF] [--verify [--against FILE]] [--export FILE [--lock-days N]] [--verify-export FILE] [--json]`.

The log is hash-chained, each entry signed by its identity, the head checkpointed and signed (auditor; docs/trust.md).
FILE is a file or ``s3://bucket/key``: written under S3 Object Lock (COMPLIANCE), read back from every locked version.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from dsv_platform.adapters.registry.certificates import load_root, verifies
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.trust import audit_seal
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.audit_export import S3Access, check_copies_extend, check_registry_against, check_writable, read_export, write_export
from dsv_platform.services.trust.builders import verify_builders
from dsv_platform.services.trust.signing import verify_publication_heads
from dsv_platform.settings import Settings, load_settings


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


def _s3(settings: Settings) -> S3Access:
    return S3Access(settings.s3_endpoint_url, settings.s3_region)


def _verify(args: argparse.Namespace, platform: Platform) -> int:
    """The whole chain, every signature and checkpoint (a filtered view cannot prove anything), then the signed state."""
    summary = trust.records(platform).verify_audit()
    against = None
    if args.against:
        against = read_export(args.against, s3=_s3(platform.settings))  # an S3 key: every version under COMPLIANCE lock
        check_registry_against(trust.records(platform).audit_entries(), against)
    checked = platform.registry.verify_signed_state()  # UNTRUSTED (exit 13) naming the first state or alias no signature backs
    heads = verify_publication_heads(platform)  # UNTRUSTED naming a publication whose signed audit head the log lost
    builders = verify_builders(platform)  # UNTRUSTED naming a realization whose builder or launch row is not what its statement signed
    doc = {"verified": True, **summary, "signed_state": checked, "publication_heads": heads, "signed_builders": builders}
    if against is not None:
        doc["against"] = {"location": against.location, "copies": [c.label for c in against.copies], "note": against.note}
    sealed = f"; {summary['signed_entries']} signed entries, {summary['checkpoints']} signed checkpoint(s)"
    signed = f"; signed state of {checked['realizations']} realization(s) and {checked['aliases']} alias(es) verifies; {heads} publication head(s) in the log"
    signed += f"; {builders} signed builder(s) match"
    anchored = f"; {against.note}" if against is not None else ""
    print(json.dumps(doc, indent=2) if args.json else f"audit log verifies: {doc['entries']} entries, head {doc['head']}{sealed}{signed}{anchored}")
    return 0


def _export(args: argparse.Namespace, platform: Platform) -> int:
    trust.current_identity(platform)  # proves the key: the export's fresh checkpoint is signed by this identity
    days = args.lock_days if args.lock_days is not None else platform.settings.audit_lock_days
    check_writable(args.export, lock_days=days, s3=_s3(platform.settings))  # a bucket without Object Lock is refused before any checkpoint
    doc = trust.records(platform).checkpoint_and_export()
    where = write_export(args.export, doc, lock_days=days, s3=_s3(platform.settings))
    cp = doc["checkpoints"][-1] if doc["checkpoints"] else None
    head = f", checkpoint of entry {cp['seq']} signed by {cp['signer']!r}" if cp else ""
    print(json.dumps({"exported": args.export, "stored": where, "entries": len(doc["entries"]), "checkpoint": cp}, indent=2) if args.json
          else f"exported {len(doc['entries'])} audit entries to {where}{head}")  # fmt: skip
    return 0


def _verify_export(args: argparse.Namespace) -> int:
    """Offline: no registry; the keys must chain to the pinned root (DSV_TRUST_ROOT or the home's trust_root) when there is one."""
    settings = load_settings()
    root = load_root(settings.trust_root, settings.home)
    read = read_export(args.verify_export, s3=_s3(settings))
    for copy in read.copies:  # an S3 key: every version under COMPLIANCE lock verifies on its own, and each extends the one before
        summary = audit_seal.verify_export(copy.doc, verifies, root=root)
    check_copies_extend(read)
    rooted = "keys chain to the trust root" if root is not None else "no trust root pinned: keys as the file gives them"
    line = f"audit export verifies: {summary['entries']} entries, head {summary['head']}, {summary['checkpoints']} signed checkpoint(s); {rooted}"
    line += f"; {read.note}" if len(read.copies) > 1 or read.location.startswith("s3://") else ""
    summary |= {"trust_root": root.hex() if root else None, "copies": [c.label for c in read.copies], "note": read.note}
    print(json.dumps(summary, indent=2) if args.json else line)
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
    if args.lock_days is not None and not (args.export or "").startswith("s3://"):
        raise ConfigurationError("--lock-days N goes with --export s3://bucket/key")
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
    p.add_argument(
        "--export", metavar="FILE",
        help="sign a checkpoint of the head, then write the log, signatures, checkpoints and keys to FILE, or to s3://bucket/key under "
        "S3 Object Lock (COMPLIANCE; a bucket without Object Lock is refused, exit 18)",
    )  # fmt: skip
    p.add_argument("--lock-days", type=int, metavar="N", help="with --export s3://...: the COMPLIANCE retention in days (default DSV_AUDIT_LOCK_DAYS, 365)")
    p.add_argument("--verify-export", metavar="FILE", help="check an exported log offline, without the registry (exit 2 or 13)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_audit)
