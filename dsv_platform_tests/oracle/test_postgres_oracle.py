"""PostgreSQL as an independent oracle for `dsv-canon/1` (docs/canonical-encoding.md, "The row text").

For every type PostgreSQL shares with the spec (smallint/integer/bigint,
boolean, text, numeric(p,s), date, bytea, and timestamptz printed as its
integer microsecond epoch), the same rows are loaded into a real server and
into Arrow; each partition hash we compute must equal the SHA-256 of
``COPY (SELECT ... WHERE part = X ORDER BY key) TO STDOUT``. Floats are left
out: PostgreSQL prints float8 with shortest round-trip digits, not correctly
rounded to a fixed scale, so it is no oracle for our float rule. Text keys are
ordered with ``COLLATE "C"`` (byte order, like the spec); the database's own
collation never matters.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg2
import psycopg2.extras
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv_platform import _native
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.identity import row_gather
from dsv_platform.core.identity.hashing import hash_table, set_native

pytestmark = pytest.mark.postgres

HOSTILE = ["\t", "\n", "\r", "\\", "\b", "\f", "\v", "'", '"', "\\N", "é", "e\u0301", "日本", "😀", "\u2028", "\x85", "\x01", "\x7f", " ", "a", "Z", ","]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

WIDE_CONTRACT = parse_contract(
    {
        "name": "oracle_wide",
        "key": ["k"],
        "columns": [
            {"name": "k", "type": "int64"},
            {"name": "part", "type": "int32"},
            {"name": "i16", "type": "int16", "nullable": True},
            {"name": "i32", "type": "int32", "nullable": True},
            {"name": "b", "type": "bool", "nullable": True},
            {"name": "s", "type": "string", "nullable": True},
            {"name": "d", "type": "decimal", "precision": 12, "scale": 3, "nullable": True},
            {"name": "d0", "type": "decimal", "precision": 10, "scale": 0, "nullable": True},
            {"name": "big", "type": "decimal", "precision": 38, "scale": 10, "nullable": True},
            {"name": "day", "type": "date", "nullable": True},
            {"name": "bin", "type": "binary", "nullable": True},
            {"name": "ts", "type": "timestamp", "resolution": "us", "nullable": True},
        ],
    }
)
WIDE_DDL = """
CREATE TABLE t (
  k bigint PRIMARY KEY, part integer NOT NULL, i16 smallint, i32 integer, b boolean, s text,
  d numeric(12,3), d0 numeric(10,0), big numeric(38,10), day date, bin bytea, ts timestamptz
)"""
# timestamptz printed as the integer count of microseconds since the epoch, computed by PostgreSQL.
WIDE_SELECT = "k, part, i16, i32, b, s, d, d0, big, day, bin, (extract(epoch FROM ts) * 1000000)::bigint"


@pytest.fixture
def pg(postgres_server: Any) -> Iterator[Any]:
    conn = psycopg2.connect(postgres_server.dsn(postgres_server.create_database()))
    conn.set_client_encoding("UTF8")
    conn.autocommit = True
    try:
        yield conn
    finally:
        conn.close()


def copy_hash(conn: Any, query: str) -> str:
    buf = io.BytesIO()
    with conn.cursor() as cur:
        cur.copy_expert(f"COPY ({query}) TO STDOUT", buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def _text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 8)):
        if rng.random() < 0.6:
            parts.append(rng.choice(HOSTILE))
        else:
            cp = rng.randint(1, 0x10FFFF)
            parts.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "x")
    return "".join(parts)


def _decimal(rng: random.Random, digits: int, scale: int) -> Decimal:
    unscaled = rng.randint(-(10 ** rng.randint(0, digits)) + 1, 10 ** rng.randint(0, digits) - 1)
    return Decimal(unscaled).scaleb(-scale)


def _maybe(rng: random.Random, value: Any) -> Any:
    return None if rng.random() < 0.1 else value


def wide_rows(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    keys: set[int] = set()
    while len(keys) < n:
        keys.add(rng.randint(-(2**63), 2**63 - 1))
    rows = []
    for k in sorted(keys, key=lambda _: rng.random()):
        micros = rng.randint(-(2**50), 2**50)
        rows.append(
            {
                "k": k,
                "part": rng.randint(-2, 3),
                "i16": _maybe(rng, rng.randint(-(2**15), 2**15 - 1)),
                "i32": _maybe(rng, rng.randint(-(2**31), 2**31 - 1)),
                "b": _maybe(rng, rng.random() < 0.5),
                "s": _maybe(rng, _text(rng)),
                "d": _maybe(rng, _decimal(rng, 12, 3)),
                "d0": _maybe(rng, _decimal(rng, 10, 0)),
                "big": _maybe(rng, _decimal(rng, 38, 10)),
                "day": _maybe(rng, dt.date(1, 1, 1) + dt.timedelta(days=rng.randint(0, 3_652_058))),
                "bin": _maybe(rng, rng.randbytes(rng.randint(0, 6))),
                "ts": _maybe(rng, EPOCH + dt.timedelta(microseconds=micros)),
            }
        )
    return rows


def arrow_table(contract: Contract, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({c.name: pa.array([r[c.name] for r in rows], c.arrow_type) for c in contract.columns})


def load(conn: Any, table: str, columns: list[str], rows: list[dict[str, Any]]) -> None:
    def adapt(v: Any) -> Any:
        return psycopg2.Binary(v) if isinstance(v, bytes) else v

    with conn.cursor() as cur:
        psycopg2.extras.execute_values(cur, f"INSERT INTO {table} ({', '.join(columns)}) VALUES %s", [tuple(adapt(r[c]) for c in columns) for r in rows])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_postgres_oracle_partition_hashes_equal_copy_output(pg: Any, seed: int) -> None:
    rows = wide_rows(seed, 400)
    with pg.cursor() as cur:
        cur.execute(WIDE_DDL)
    load(pg, "t", WIDE_CONTRACT.column_names, rows)

    digest = hash_table(arrow_table(WIDE_CONTRACT, rows), WIDE_CONTRACT, partition_by="part")
    expected = {f"part={p}": copy_hash(pg, f"SELECT {WIDE_SELECT} FROM t WHERE part = {p} ORDER BY k") for p in sorted({r["part"] for r in rows})}
    assert {leaf.key: leaf.hash for leaf in digest.partitions} == expected

    whole = hash_table(arrow_table(WIDE_CONTRACT, rows), WIDE_CONTRACT)
    assert whole.partitions[0].hash == copy_hash(pg, f"SELECT {WIDE_SELECT} FROM t ORDER BY k")


@pytest.mark.skipif(not _native.available, reason="the compiled row encoder is not built")
@pytest.mark.parametrize(("bucket_bytes", "block_rows"), [(1, 1), (3000, 7), (20_000, 64)])
def test_postgres_oracle_equals_the_whole_row_gather(pg: Any, monkeypatch: pytest.MonkeyPatch, bucket_bytes: int, block_rows: int) -> None:
    """The compiled path through tiny key-range buckets, segments and gather blocks still hashes what COPY writes."""
    monkeypatch.setattr(row_gather, "MIN_ROWS", 1)
    monkeypatch.setattr(row_gather, "BUCKET_BYTES", bucket_bytes)
    monkeypatch.setattr(row_gather, "GATHER_ROWS", block_rows)
    rows = wide_rows(4, 300)
    with pg.cursor() as cur:
        cur.execute(WIDE_DDL)
    load(pg, "t", WIDE_CONTRACT.column_names, rows)
    previous = set_native(True)
    try:
        whole = hash_table(arrow_table(WIDE_CONTRACT, rows), WIDE_CONTRACT)
    finally:
        set_native(previous)
    assert whole.partitions[0].hash == copy_hash(pg, f"SELECT {WIDE_SELECT} FROM t ORDER BY k")


def test_postgres_oracle_negative_zero_and_extreme_values(pg: Any) -> None:
    rows = [
        {"k": -(2**63), "part": 0, "i16": -(2**15), "i32": -(2**31), "b": False, "s": "", "d": Decimal("-0.000"), "d0": Decimal("-0"),
         "big": Decimal("-0.0000000001"), "day": dt.date(1, 1, 1), "bin": b"", "ts": EPOCH - dt.timedelta(microseconds=1)},
        {"k": 2**63 - 1, "part": 0, "i16": 2**15 - 1, "i32": 2**31 - 1, "b": True, "s": "\\N", "d": Decimal("-0.001"), "d0": Decimal("9999999999"),
         "big": Decimal("9" * 28 + "." + "9" * 10), "day": dt.date(9999, 12, 31), "bin": b"\x00\xff\\", "ts": EPOCH},
        {"k": 0, "part": 0, **{c: None for c in ("i16", "i32", "b", "s", "d", "d0", "big", "day", "bin", "ts")}},
    ]
    with pg.cursor() as cur:
        cur.execute(WIDE_DDL)
    load(pg, "t", WIDE_CONTRACT.column_names, rows)
    digest = hash_table(arrow_table(WIDE_CONTRACT, rows), WIDE_CONTRACT, partition_by="part")
    assert digest.partitions[0].hash == copy_hash(pg, f"SELECT {WIDE_SELECT} FROM t WHERE part = 0 ORDER BY k")


TEXT_KEY_CONTRACT = parse_contract(
    {
        "name": "oracle_text_key",
        "key": ["name", "n"],
        "columns": [{"name": "name", "type": "string"}, {"name": "n", "type": "int32"}, {"name": "note", "type": "string", "nullable": True}],
    }
)


def test_postgres_oracle_text_key_orders_by_bytes_with_collate_c(pg: Any) -> None:
    rng = random.Random(7)
    names = sorted({_text(rng) for _ in range(300)} | {"a", "Z", "é", "e\u0301", "e", "f", "", "ab", "😀", "\uffff"})
    rows = [{"name": name, "n": n, "note": _maybe(rng, _text(rng))} for name in names for n in rng.sample([-10, -1, 0, 9, 10, 100], 2)]
    rng.shuffle(rows)
    with pg.cursor() as cur:
        cur.execute('CREATE TABLE tk (name text COLLATE "C" NOT NULL, n integer NOT NULL, note text, PRIMARY KEY (name, n))')
    load(pg, "tk", TEXT_KEY_CONTRACT.column_names, rows)
    digest = hash_table(arrow_table(TEXT_KEY_CONTRACT, rows), TEXT_KEY_CONTRACT)
    assert digest.partitions[0].hash == copy_hash(pg, 'SELECT name, n, note FROM tk ORDER BY name COLLATE "C", n')


STRING_CONTRACT = parse_contract(
    {"name": "oracle_strings", "key": ["k"], "columns": [{"name": "k", "type": "int32"}, {"name": "s", "type": "string", "nullable": True}]}
)
pg_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")), max_size=12
).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(st.none(), pg_text), min_size=0, max_size=25))
def test_postgres_oracle_hostile_strings(pg: Any, values: list[str | None]) -> None:
    rows = [{"k": i * 7 - 50, "s": v} for i, v in enumerate(values)]
    with pg.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS ts_; CREATE TABLE ts_ (k integer PRIMARY KEY, s text)")
    if rows:
        load(pg, "ts_", ["k", "s"], rows)
    digest = hash_table(arrow_table(STRING_CONTRACT, rows), STRING_CONTRACT)
    assert digest.partitions[0].hash == copy_hash(pg, "SELECT k, s FROM ts_ ORDER BY k")
