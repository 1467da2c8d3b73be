"""The engine's pool shrunk once its relational work is done, and freed memory given back (issue 22)."""

from __future__ import annotations

from pathlib import Path

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine
from dsv_platform.adapters.engine.memory import pool_limit, release_free_memory, shrink_pool


def test_the_pool_shrinks_to_a_quarter_of_its_configured_limit_once(tmp_path: Path) -> None:
    with engine(EngineLimits(memory=1 << 30, threads=1, spill_root=tmp_path)) as con:
        assert pool_limit(con) == 1 << 30
        con.execute("CREATE TABLE t AS SELECT i, repeat('x', 100) AS s FROM range(200000) r(i)")
        shrink_pool(con)
        assert pool_limit(con) == 256 << 20
        shrink_pool(con)  # a second part listing (the privacy-filtered examples) does not shrink it further
        assert pool_limit(con) == 256 << 20
        assert con.execute("SELECT count(*), sum(length(s)) FROM t").fetchone() == (200000, 20_000_000)  # the rows are all still read
    with engine(EngineLimits(memory=128 << 20, threads=1, spill_root=tmp_path)) as con:
        shrink_pool(con)
        assert pool_limit(con) == 64 << 20  # never below the engine's floor
    release_free_memory()  # a no-op where the C library has no malloc_trim
