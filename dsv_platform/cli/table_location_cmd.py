"""`dsv table-location TABLE [--snapshot ID | --tag TAG] [--json]`: where DuckDB (or any Iceberg reader) finds a canonical table.

It needs a consumer grant on the table's source without a purpose, or operator (exit 7 otherwise), and is audited.
"""

from __future__ import annotations

import argparse
import json

from dsv_platform.adapters.iceberg.duckdb_iceberg import table_location
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.services.trust.access import authorize_table


@with_platform
def _table_location(args: argparse.Namespace, platform: Platform) -> int:
    authorize_table(platform, args.table)  # the location reads every row and column: a grant on the table, audited
    location = table_location(platform.tables, args.table, snapshot_id=args.snapshot, ref=args.tag)
    if args.json:
        print(json.dumps(location.as_dict(), indent=2))
        return 0
    print(f"metadata: {location.metadata_location}")
    if location.snapshot_id is not None:
        print(f"snapshot: {location.snapshot_id}" + (f" (tag {location.ref})" if location.ref else ""))
    print(f"duckdb:   {location.query()};")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("table-location", help="a canonical table's Iceberg metadata file and the DuckDB query reading it (docs/interop.md)")
    p.add_argument("table", metavar="TABLE", help="a canonical table: a source (transactions) or a label version (labels_fraud_v6)")
    p.add_argument("--snapshot", type=int, metavar="ID", help="read this snapshot instead of the current one")
    p.add_argument("--tag", metavar="TAG", help="read the snapshot this Iceberg tag names (a realization's pin: see `dsv lineage`)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_table_location)
