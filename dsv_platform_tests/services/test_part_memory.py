"""Issue 22: one partition larger than a memory cap is hashed and stored under it (the build's ``parts`` stage).

A 4M-row partition of 230-byte rows (about 0.9 GB in Arrow) is made inside a build engine with a 256 MiB pool (128 MiB once the parts start), then
prepared by the publisher's streamed path (the engine sorts by key, spilling; each table is hashed and written to the
spool file as it comes) in a process under a 600 MiB memory cgroup. The same partition prepared whole (read, sorted,
hashed, Parquet bytes: the path every build took before) is killed by the same cap, so the cap is below the partition.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dsv_platform_tests.fixtures.memory_cap import run_capped

pytestmark = pytest.mark.slow  # about 40 s of CPU

ROWS = 4_000_000
CAP = 600 << 20

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine
    from dsv_platform.core.contracts.contract import parse_contract
    from dsv_platform.core.identity.hashing import hash_partition
    from dsv_platform.services.publication.examples import EngineExamples
    from dsv_platform.services.publication.parts import parquet_bytes, sorted_for_storage, spooled_part

    folder, rows, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    contract = parse_contract({"name": "wide", "key": ["id"], "partition_by": "day", "columns": [
        {"name": "id", "type": "string"}, {"name": "day", "type": "date"},
        {"name": "note", "type": "string"}, {"name": "amount", "type": "float64", "scale": 4}]})
    with engine(EngineLimits(memory=256 << 20, threads=1, spill_root=folder)) as con:
        con.execute(f\"\"\"CREATE TABLE examples AS SELECT 'evt-' || lpad(((i * 7919) % {rows})::VARCHAR, 12, '0') AS id,
            DATE '2026-06-01' AS day, repeat('n', 200) || i::VARCHAR AS note, round((i % 1000) / 7.0, 4) AS amount
            FROM range({rows}) r(i)\"\"\")
        [(key, reader)] = EngineExamples(con, "examples", contract).parts()
        if mode == "streamed":
            part = spooled_part(key, reader, contract)
            kept = Path(part.data).replace(folder / "part.parquet")  # the spool file lives in the engine's folder, removed on exit
            print(json.dumps({"hash": part.hash, "rows": part.rows, "file": str(kept)}))
        else:
            whole = sorted_for_storage(reader(), contract)
            print(json.dumps({"hash": hash_partition(whole, contract).hash, "bytes": len(parquet_bytes(whole))}))
""")


def test_a_partition_larger_than_the_cap_is_prepared_under_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSV_")}
    streamed = run_capped([sys.executable, "-c", SCRIPT, str(tmp_path), str(ROWS), "streamed"], CAP, env=env)
    assert streamed.returncode == 0, streamed.stderr[-2000:]
    done = json.loads(streamed.stdout.strip().splitlines()[-1])
    assert done["rows"] == ROWS and streamed.peak_bytes <= CAP
    stored = pq.ParquetFile(done["file"])
    assert stored.metadata.num_rows == ROWS and stored.metadata.num_row_groups == -(-ROWS // (1 << 17))
    ids = stored.read_row_group(0, columns=["id"]).column("id").to_pylist()
    assert ids == sorted(ids) and ids[0] == "evt-000000000000"  # in key order, from the first key
    whole = run_capped([sys.executable, "-c", SCRIPT, str(tmp_path / "whole"), str(ROWS), "whole"], CAP, env=env)
    assert whole.killed, f"the whole partition fit under the cap (rc {whole.returncode}): the cap proves nothing"
