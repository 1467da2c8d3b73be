"""`dsv home relocate`: make a moved or copied embedded home's canonical tables its own (issue 25 item 8).

The embedded Iceberg catalog and metadata name files by absolute path. A moved home whose old place is gone is
relocated when it is opened; a copy (or a home moved while its old place exists again) is refused until this
command rewrites its table metadata under its own warehouse (adapters/iceberg/iceberg_relocate.py). Data files,
snapshot ids, tags and the registry are untouched; the original home is never written. An embedded home one level
inside (the fraud demo's ``semantic-demo`` scratch world) is relocated with it. Details: docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json

from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_catalog, relocate_home
from dsv_platform.core.errors import EnvironmentSetupError, mask_url
from dsv_platform.settings import load_settings


def _relocate(args: argparse.Namespace) -> int:
    settings = load_settings()
    url, warehouse = settings.iceberg_catalog_url, settings.iceberg_warehouse
    if not url.startswith("sqlite:///") or "://" in warehouse:
        where = f"DSV_ICEBERG_CATALOG_URL {mask_url(url)} over {mask_url(warehouse)}"  # never a password on the error line
        raise EnvironmentSetupError(f"{where}: only the embedded SQLite catalog over a local warehouse is relocated")
    embedded = (url, warehouse) == (settings.with_home(settings.home).iceberg_catalog_url, settings.with_home(settings.home).iceberg_warehouse)
    done = relocate_home(settings.home) if embedded else relocate_catalog(url, warehouse)
    if args.json:
        print(json.dumps({"home": str(settings.home), "relocated": [r.__dict__ for r in done]}, indent=2))
        return 0
    for r in done:
        print(f"{r.table}: {r.old_location} -> {r.new_location} ({r.snapshots} snapshots, {r.manifests} manifests rewritten)")
    print(f"DSV_HOME={settings.home}: " + (f"{len(done)} table(s) relocated" if done else "every table already lives here"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("home", help="the embedded home: relocate a moved or copied home's canonical tables (docs/reliability.md)")
    hs = p.add_subparsers(dest="home_command", metavar="ACTION", required=True)
    r = hs.add_parser("relocate", help="rewrite the canonical tables' metadata under this home's warehouse (data files untouched)")
    r.add_argument("--json", action="store_true")
    r.set_defaults(handler=_relocate)
