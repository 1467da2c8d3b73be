"""(l) Which snapshots of a table's history hold a subject: the platform's lookup / a pyiceberg scan of each snapshot.

A privacy deletion must find every snapshot still holding the subject's rows (to release and expire them). A scan
per snapshot reads every manifest of every snapshot (an append lists the older manifests again: n^2 / 2 manifest
reads for n appends); ``adapters/iceberg/iceberg_history.py`` reads each manifest once and each data file the bounds
leave once. One table of daily appends (ROWS rows over ACCOUNTS accounts each), timed at 20, 100 and 300 snapshots
for one account present in every day: the median of REPEATS lookups, both over the same table. The ratio is the
platform's over the scans at 300 snapshots (a daily table ten months old). ``--rows`` does not apply. Run alone:
``python -m benchmarks.bench_history``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common import Result, print_result

SNAPSHOTS = (20, 100, 300)
ROWS, ACCOUNTS, REPEATS = 200, 50, 3
TARGET = 0.2


def _median_s(lookup: object, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        lookup()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure() -> dict[int, dict[str, float]]:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo

    from dsv_platform.adapters.iceberg.iceberg_history import snapshots_holding

    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="dsv-bench-history-") as folder:
        root = Path(folder)
        catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
        catalog.create_namespace("ns")
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("account", pa.string()), pa.field("amount", pa.float64())])
        table = catalog.create_table("ns.t", schema=schema)
        wanted = EqualTo("account", "acct-7")
        made = 0
        for target in SNAPSHOTS:
            while made < target:
                ids = pa.array(range(made * ROWS, (made + 1) * ROWS), pa.int64())
                table.append(pa.table({"id": ids, "account": [f"acct-{i % ACCOUNTS}" for i in range(ROWS)], "amount": [1.0] * ROWS}, schema=schema))
                made += 1
            tbl = catalog.load_table("ns.t")

            def scans(tbl=tbl) -> list[int]:
                return [s.snapshot_id for s in tbl.snapshots() if tbl.scan(row_filter=wanted, snapshot_id=s.snapshot_id, limit=1).to_arrow().num_rows]

            def platform(tbl=tbl) -> list[int]:
                return snapshots_holding(tbl, wanted)

            assert platform() == scans(), "the lookup and the scans disagree"
            out[target] = {"scans_s": _median_s(scans), "platform_s": _median_s(platform)}
    return out


def run(rows: int) -> Result:
    m = measure()
    top = m[SNAPSHOTS[-1]]
    ratio = top["platform_s"] / top["scans_s"]
    details = {f"{n} snapshots": f"a scan per snapshot {v['scans_s']:.2f} s, platform {v['platform_s']:.3f} s" for n, v in m.items()}
    return Result(f"l) snapshots holding a subject / a scan per snapshot ({SNAPSHOTS[-1]} snapshots)", ratio, f"<= {TARGET}x", ratio <= TARGET, details)


if __name__ == "__main__":
    print_result(run(0))
