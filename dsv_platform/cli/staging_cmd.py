"""`dsv staging list [--json]`, `dsv staging discard TABLE BRANCH --reason TEXT [--json]`: a blocked load's staging branches.

Details: docs/storage.md ("Write-audit-publish", "Abandoned branches"); services/ingest/staging.py.
"""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.ingest.staging import discard_staging, staging_branches


@with_platform
def _list(args: argparse.Namespace, platform: Platform) -> int:
    branches = staging_branches(platform)
    if args.json:
        print(json.dumps([b.as_dict() for b in branches], indent=2))
        return 0
    for b in branches:
        batches = ", ".join(b.batches) or "no batch named"
        when = f"committed {b.committed_at:%Y-%m-%d %H:%M}Z, GC removes it after {b.expires_at:%Y-%m-%d %H:%M}Z"
        print(f"{b.table:<20} {b.name}  snapshot {b.snapshot_id}  {b.rows} rows ({batches})  {when}")
    print(f"{len(branches)} staging branch(es)" + (" (blocked loads: docs/storage.md, Write-audit-publish)" if branches else ""))
    return 0


@with_platform
def _discard(args: argparse.Namespace, platform: Platform) -> int:
    gone = discard_staging(platform, args.table, args.branch, reason=args.reason)
    if args.json:
        print(json.dumps({"discarded": gone.as_dict()}, indent=2))
        return 0
    print(f"{gone.table}: staging branch {gone.name} discarded ({gone.rows} rows; its snapshot {gone.snapshot_id} stays until GC expires it)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("staging", help="the staging branches blocked loads left (wap-*): list them, discard one (operator)")
    actions = p.add_subparsers(dest="staging_command", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="every staging branch: its table, head snapshot, the batches and rows it holds beyond main, when GC removes it")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(handler=_list)
    d = actions.add_parser("discard", help="remove one staging branch before GC would (operator, audited; its batches stay landed)")
    d.add_argument("table", metavar="TABLE", help="the canonical table (as `dsv staging list` shows it)")
    d.add_argument("branch", metavar="BRANCH", help="the branch (wap- and 16 hex digits)")
    d.add_argument("--reason", required=True, help="why (kept in the audit log)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(handler=_discard)
