"""The engine's pool shrunk once its relational work is done, and freed memory given back (issue 22)."""

from __future__ import annotations

from pathlib import Path

from dsv_platform.adapters.engine.duckdb_engine import EngineLimits, engine, engine_cursor, row_group_rows
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


def test_a_small_budget_gets_row_groups_its_threads_can_hold(tmp_path: Path) -> None:
    """Each DuckDB thread writing a table holds a whole row group outside the pool: a small budget gets smaller groups."""
    assert [row_group_rows(EngineLimits(memory=m << 20, threads=2)) for m in (64, 192, 1024, 4096)] == [8192, 16384, 122_880, 122_880]
    assert [row_group_rows(EngineLimits(memory=1 << 30, threads=t)) for t in (1, 4, 8, 64, 512)] == [122_880, 65536, 32768, 4096, 2048]
    for memory, expected in ((192 << 20, 16384), (1 << 30, 122_880)):
        with engine(EngineLimits(memory=memory, threads=2, spill_root=tmp_path)) as con:
            con.execute("CREATE TABLE t AS SELECT i, repeat('x', 100) AS s FROM range(300000) r(i)")
            reader = engine_cursor(con)  # another thread's connection: the same database, the same tables
            groups = reader.execute("SELECT max(row_group_id) + 1 FROM pragma_storage_info('t')").fetchone()
            assert groups is not None and groups[0] == -(-300_000 // expected)
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (300_000,)


def test_a_later_step_reuses_the_database_instance_and_sees_nothing_of_the_earlier_one(tmp_path: Path) -> None:
    """Making a DuckDB instance costs about 30 ms; a step that ended well without spilling leaves its instance for the next."""
    limits = EngineLimits(memory=256 << 20, threads=1, spill_root=tmp_path)
    with engine(limits) as con:
        con.execute("SET GLOBAL custom_extension_repository = 'dsv-first-step'")  # instance-wide: marks this instance
        con.execute("CREATE TABLE rows_of_the_first_step AS SELECT 1 AS a")
        shrink_pool(con)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the step's folder and database file are gone
    with engine(limits) as con:
        assert con.execute("SELECT current_setting('custom_extension_repository')").fetchone() == ("dsv-first-step",), "reused"
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)  # nothing of the earlier step
        assert pool_limit(con) == 256 << 20  # the shrunk limit put back
        con.execute("SET GLOBAL custom_extension_repository = 'dsv-spilled'")
        con.execute("SET memory_limit = '64MiB'")
        con.execute("CREATE TABLE big AS SELECT range AS a, md5(range::VARCHAR) AS b FROM range(2000000) ORDER BY b")  # spills
    with engine(limits) as con:  # a database that spilled is closed, not reused
        assert con.execute("SELECT current_setting('custom_extension_repository')").fetchone() != ("dsv-spilled",)
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)
    with engine(EngineLimits(memory=512 << 20, threads=1, spill_root=tmp_path)) as con:  # other limits: another instance
        assert pool_limit(con) == 512 << 20
    assert list(tmp_path.iterdir()) == []
