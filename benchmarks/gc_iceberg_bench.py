"""GC's Iceberg inventory on a canonical table of many data files: batches from metadata vs reading every file.

``--build DIR`` writes a SQLite-catalog home under DIR: ``--files`` daily appends of the fraud example's
transactions (``--rows`` rows each, one data file each, a landed-length batch ref). ``--time DIR`` times
``iceberg_maintenance.inventory`` on it (best of ``--repeat``) and prints JSON. Run ``--time`` with the
code before issue 22 item 3 on the PYTHONPATH to get the "before" figure (it reads every data file):
``python -m benchmarks.gc_iceberg_bench --build /tmp/h && python -m benchmarks.gc_iceberg_bench --time /tmp/h``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

from dsv_platform.adapters.iceberg import iceberg_maintenance
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS


def _tables(home: Path) -> CanonicalTables:
    return CanonicalTables.open(f"sqlite:///{home / 'catalog.db'}", str(home / "warehouse"))


def build(home: Path, files: int, rows: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    tables, domain = _tables(home), FraudDomain(rows_per_day=rows)
    for i in range(files):
        day = domain.start + dt.timedelta(days=i)
        batch = events.daily_batch(domain, "transactions", day)
        ref = f"transactions/{day.isoformat()}/{batch.batch_id}@" + f"{i:064x}"
        tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=ref)


def time_inventory(home: Path, repeat: int) -> dict[str, object]:
    tables, best, files = _tables(home), float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        files = iceberg_maintenance.inventory(tables)[2]
        best = min(best, time.perf_counter() - start)
    return {"inventory_s": round(best, 3), "data_files": len(files), "attributed": sum(1 for f in files if f.batches)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path)
    parser.add_argument("--time", type=Path)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.build:
        build(args.build, args.files, args.rows)
    if args.time:
        print(json.dumps(time_inventory(args.time, args.repeat)))


if __name__ == "__main__":
    main()
