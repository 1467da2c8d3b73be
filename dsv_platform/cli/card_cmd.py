"""`dsv card REF [--json]`: the dataset card of a realization (Markdown; ``--json``: the structured card)."""

from __future__ import annotations

import argparse
import json

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform


@with_platform
def _card(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.core.publication.card import card_markdown  # imported here: `dsv --help` stays light
    from dsv_platform.core.publication.refs import parse_ref
    from dsv_platform.services.publication.card import card_of
    from dsv_platform.services.publication.datasets import load_manifest
    from dsv_platform.services.trust.access import authorize

    ref = parse_ref(args.ref)
    authorize(platform, ref.name, ref.version, purpose=args.purpose, ref=args.ref)  # ACCESS_DENIED before anything is revealed
    realization = platform.registry.resolve_ref(ref, actor=platform.actor)
    card = card_of(platform, realization, load_manifest(platform.registry, realization))
    if args.json:
        print(json.dumps(card, indent=2))
    else:
        print(card_markdown(card))
        print(f"Stored at publication as object `{card['stored_card'] or '-'}` (named in the signed statement).")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("card", help="the dataset card of a realization: purpose, composition, collection, quality, privacy, uses, maintenance")
    p.add_argument("ref", help="NAME:VERSION, NAME:VERSION@sha256:<hash> or NAME:VERSION@ALIAS")
    p.add_argument("--purpose", help="why you read it; required where the definition declares access purposes")
    p.add_argument("--json", action="store_true", help="the structured card (dsv-card/1)")
    p.set_defaults(handler=_card)
