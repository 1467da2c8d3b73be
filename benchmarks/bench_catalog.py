"""(k) Loading a canonical table from the SQL catalog: the platform's catalog / pyiceberg's ``SqlCatalog``, same table.

pyiceberg reads and parses the table's metadata file on every ``load_table``, and the file grows with every snapshot;
``adapters/iceberg/sql_catalog.py`` parses a metadata file once per process (it is written once and never changed) and
still reads the catalog row each time. One table of 1-row appends, timed at 10, 200 and 1,000 snapshots: a load's
median over LOADS loads after one warm load, both catalogs interleaved. The ratio is the platform's over pyiceberg's
at 1,000 snapshots (a daily table after three years). ``--rows`` does not apply. Run alone:
``python -m benchmarks.bench_catalog``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from benchmarks.common import Result, print_result

SNAPSHOTS = (10, 200, 1000)
LOADS = 40
TARGET = 0.5


def _median_ms(catalog: object, loads: int = LOADS) -> float:
    catalog.load_table("ns.t")  # type: ignore[attr-defined]
    times = []
    for _ in range(loads):
        start = time.perf_counter()
        catalog.load_table("ns.t")  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure() -> dict[int, dict[str, float]]:
    from pyiceberg.catalog.sql import SqlCatalog as Plain

    from dsv_platform.adapters.iceberg.sql_catalog import SqlCatalog as Cached

    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="dsv-bench-catalog-") as folder:
        root = Path(folder)
        props = {"uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{root}/warehouse"}
        plain = Plain("bench", **props)
        plain.create_namespace("ns")
        row = pa.table({"id": pa.array([1], pa.int64()), "v": pa.array(["x"])})
        table = plain.create_table("ns.t", schema=row.schema)
        made = 0
        for target in SNAPSHOTS:
            while made < target:
                table.append(row)
                made += 1
            cached = Cached("bench", **props)
            size = Path(table.metadata_location.removeprefix("file://")).stat().st_size
            out[target] = {"metadata_kB": round(size / 1e3, 1), "pyiceberg_ms": _median_ms(plain), "platform_ms": _median_ms(cached)}
    return out


def run(rows: int) -> Result:
    m = measure()
    top = m[SNAPSHOTS[-1]]
    ratio = top["platform_ms"] / top["pyiceberg_ms"]
    details = {
        f"{n} snapshots": f"metadata {v['metadata_kB']} kB: pyiceberg {v['pyiceberg_ms']:.2f} ms, platform {v['platform_ms']:.2f} ms a load"
        for n, v in m.items()
    }
    return Result(f"k) catalog load / pyiceberg SqlCatalog load ({SNAPSHOTS[-1]} snapshots)", ratio, f"<= {TARGET}x", ratio <= TARGET, details)


if __name__ == "__main__":
    print_result(run(0))
