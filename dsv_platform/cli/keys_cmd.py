"""`dsv keys copy --to TARGET`: copy the crypto-erasure key store to another one (a key folder to PostgreSQL), verified.

Details: docs/gc-and-privacy.md, "Moving the keys to another key store".
"""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.privacy.key_copy import copy_key_store


@with_platform
def _copy(args: argparse.Namespace, platform: Platform) -> int:
    source, target, report = copy_key_store(platform, args.to)
    doc = {"from": source, "to": target, **report.counts, "generation": report.generation, "digest": report.digest, "written": report.written}
    c = report.counts
    text = (
        f"copied the key store {source} to {target} and verified it: {c['keys']} key(s), {c['erased']} erased, "
        f"{c['bindings']} binding(s), {c['deletions']} deletion record(s), redaction generation {report.generation}, salt; "
        f"{report.written} entr{'y' if report.written == 1 else 'ies'} written now; set digest {report.digest}\n"
        f"next: set DSV_KEY_STORE to the target everywhere (every process reads the same key store)"
    )
    print(json.dumps(doc, indent=2) if args.json else text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    keys = sub.add_parser("keys", help="the crypto-erasure key store: copy it to another one (a key folder to PostgreSQL), verified")
    ks = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    c = ks.add_parser(
        "copy",
        help="operator: copy every key, erasure, binding, deletion record, the generation and the salt of the configured key store "
        "(DSV_KEY_STORE) into TARGET, then verify; refuses a target holding anything else; a rerun completes an interrupted copy",
    )
    target_help = "postgresql+psycopg2://USER@HOST/DB (its password from PGPASSWORD or ~/.pgpass: one in the URL shows in the process list), or a folder"
    c.add_argument("--to", required=True, metavar="TARGET", help=target_help)
    c.add_argument("--json", action="store_true")
    c.set_defaults(handler=_copy)
