"""Invariants of the canonical encoding (hypothesis): layout never matters, every change shows, value texts follow the spec."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import random
import tempfile
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsv_platform.cli.main import main as dsv_main
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.core.errors import ContractViolationError
from dsv_platform.core.identity.canonical import value_text
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.identity.streaming import hash_batches

CONTRACT_DOC: dict[str, Any] = {
    "name": "props",
    "key": ["k"],
    "partition_by": "p",
    "columns": [
        {"name": "k", "type": "int64"},
        {"name": "p", "type": "int8"},
        {"name": "s", "type": "string", "nullable": True},
        {"name": "d", "type": "decimal", "precision": 12, "scale": 3, "nullable": True},
        {"name": "f", "type": "float64", "scale": 3, "nullable": True},
        {"name": "ts", "type": "timestamp", "resolution": "us"},
        {"name": "day", "type": "date", "nullable": True},
        {"name": "b", "type": "bool", "nullable": True},
        {"name": "bin", "type": "binary", "nullable": True},
    ],
}
CONTRACT = parse_contract(CONTRACT_DOC)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

texts = st.text(alphabet=st.sampled_from(["a", "Z", "\t", "\n", "\\", "\r", "\b", "\v", "\f", "é", "e\u0301"[1], "😀", "\x00", " "]), max_size=6)
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "p": st.integers(0, 3),
    "s": st.one_of(st.none(), texts),
    "d": st.one_of(st.none(), st.decimals(min_value=-10**8, max_value=10**8, places=3, allow_nan=False, allow_infinity=False)),
    "f": st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64)),
    "ts": st.integers(-(2**50), 2**50).map(lambda us: EPOCH + dt.timedelta(microseconds=us)),
    "day": st.one_of(st.none(), st.dates()),
    "b": st.one_of(st.none(), st.booleans()),
    "bin": st.one_of(st.none(), st.binary(max_size=4)),
}


@st.composite
def datasets(draw: Any, min_size: int = 0) -> list[dict[str, Any]]:
    keys = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=min_size, max_size=30, unique=True))
    return [{"k": k, **{name: draw(strategy) for name, strategy in VALUES.items()}} for k in keys]


def to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({c.name: pa.array([r[c.name] for r in rows], c.arrow_type) for c in CONTRACT.columns})


def chunks(table: pa.Table, rng: random.Random) -> list[tuple[str, pa.RecordBatch]]:
    out, start, n = [], 0, table.num_rows
    while start < n:
        size = rng.randint(1, max(1, n // 2))
        for i, batch in enumerate(table.slice(start, size).to_batches(max_chunksize=rng.randint(1, 8))):
            out.append((f"file{start}-{i}", batch))
        start += size
    rng.shuffle(out)
    return out


def leaves(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {p.key: p.hash for p in hash_table(to_table(rows), CONTRACT, partition_by="p").partitions}


@settings(max_examples=30, deadline=None)
@given(rows=datasets(), seed=st.integers(0, 2**32))
def test_canonical_row_order_and_batching_never_change_the_hash(rows: list[dict[str, Any]], seed: int) -> None:
    rng = random.Random(seed)
    reference = hash_table(to_table(rows), CONTRACT, partition_by="p")
    shuffled = rows[:]
    rng.shuffle(shuffled)
    assert hash_table(to_table(shuffled), CONTRACT, partition_by="p") == reference
    assert hash_batches(chunks(to_table(shuffled), rng), CONTRACT, partition_by="p") == reference
    if rows:
        assert hash_batches(chunks(to_table(shuffled), rng), CONTRACT, partition_by="p", spill_bytes=1) == reference


def _dsv_hash_json(path: Path, contract: Path) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert dsv_main(["hash", str(path), "--contract", str(contract), "--json"]) == 0
    return json.loads(out.getvalue())


@settings(max_examples=12, deadline=None)
@given(rows=datasets(min_size=1), seed=st.integers(0, 2**32))
def test_canonical_dsv_hash_on_a_folder_ignores_file_layout(rows: list[dict[str, Any]], seed: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        contract = root / "contract.yaml"
        contract.write_text(json.dumps(CONTRACT_DOC), encoding="utf-8")  # JSON is YAML
        pq.write_table(to_table(rows), root / "one.parquet")
        folder = root / "many"
        folder.mkdir()
        shuffled = rows[:]
        rng.shuffle(shuffled)
        table = to_table(shuffled)
        start = 0
        while start < table.num_rows:
            size = rng.randint(1, table.num_rows)
            sub = folder / f"sub{rng.randint(0, 2)}"
            sub.mkdir(exist_ok=True)
            pq.write_table(
                table.slice(start, size),
                sub / f"part-{start:05d}.parquet",
                row_group_size=rng.randint(1, 5),
                compression=rng.choice(["snappy", "zstd", "none", "gzip"]),
            )
            start += size
        one = _dsv_hash_json(root / "one.parquet", contract)
        many = _dsv_hash_json(folder, contract)
    assert many == one
    assert one["content_hash"] == hash_table(to_table(rows), CONTRACT, partition_by="p").content_hash


def _canonically_different(column: str, old: Any, new: Any) -> bool:
    col = CONTRACT.column(column)
    texts = value_text(pa.array([old, new], col.arrow_type), col)
    return texts[0] != texts[1]


@settings(max_examples=80, deadline=None)
@given(rows=datasets(min_size=1), data=st.data())
def test_canonical_any_value_change_changes_exactly_one_leaf_and_the_root(rows: list[dict[str, Any]], data: Any) -> None:
    i = data.draw(st.integers(0, len(rows) - 1))
    column = data.draw(st.sampled_from([c for c in VALUES if c != "p"]))
    new = data.draw(VALUES[column])
    assume(_canonically_different(column, rows[i][column], new))
    changed = [dict(r) for r in rows]
    changed[i][column] = new
    before, after = hash_table(to_table(rows), CONTRACT, partition_by="p"), hash_table(to_table(changed), CONTRACT, partition_by="p")
    assert before.content_hash != after.content_hash
    b, a = {p.key: p.hash for p in before.partitions}, {p.key: p.hash for p in after.partitions}
    assert b.keys() == a.keys()
    assert [k for k in b if b[k] != a[k]] == [f"p={rows[i]['p']}"]
    assert before.schema_hash == after.schema_hash


@settings(max_examples=30, deadline=None)
@given(rows=datasets(min_size=1), data=st.data())
def test_canonical_row_insertion_or_deletion_changes_the_hash(rows: list[dict[str, Any]], data: Any) -> None:
    before = hash_table(to_table(rows), CONTRACT, partition_by="p")
    i = data.draw(st.integers(0, len(rows) - 1))
    fewer = rows[:i] + rows[i + 1 :]
    after = hash_table(to_table(fewer), CONTRACT, partition_by="p")
    assert after.content_hash != before.content_hash
    key = f"p={rows[i]['p']}"
    leaf_before = next(p for p in before.partitions if p.key == key)
    leaf_after = next((p for p in after.partitions if p.key == key), None)
    assert leaf_after is None or leaf_after.hash != leaf_before.hash
    new_key = data.draw(st.integers(-(2**63), 2**63 - 1).filter(lambda k: k not in {r["k"] for r in rows}))
    more = [*rows, {**rows[i], "k": new_key}]
    assert hash_table(to_table(more), CONTRACT, partition_by="p").content_hash != before.content_hash


def test_canonical_moving_a_row_between_partitions_changes_two_leaves() -> None:
    rows = [{"k": k, **{c: None for c in VALUES}, "p": k % 3, "ts": EPOCH} for k in range(9)]
    moved = [dict(r) for r in rows]
    moved[4]["p"] = 0
    b, a = leaves(rows), leaves(moved)
    assert [k for k in b if b[k] != a[k]] == ["p=0", "p=1"]


SCHEMA_CHANGES = st.sampled_from(["rename", "type", "unit", "scale", "nullable"])


@settings(max_examples=40, deadline=None)
@given(column=st.sampled_from(CONTRACT_DOC["columns"][2:]), change=SCHEMA_CHANGES, name=st.text(alphabet="abcxyz_", min_size=1, max_size=5))
def test_canonical_schema_changes_change_the_schema_hash(column: dict[str, Any], change: str, name: str) -> None:
    doc = json.loads(json.dumps(CONTRACT_DOC))
    target = next(c for c in doc["columns"] if c["name"] == column["name"])
    if change == "rename":
        assume(name not in {c["name"] for c in doc["columns"]})
        target["name"] = name
    elif change == "type":
        target.clear()
        target.update({"name": column["name"], "type": "string" if column["type"] != "string" else "binary", "nullable": True})
    elif change == "unit":
        target["unit"] = name
    elif change == "scale":
        assume("scale" in target)
        target["scale"] += 1
    else:
        target["nullable"] = not target.get("nullable", False)
    assert parse_contract(doc).schema_hash != CONTRACT.schema_hash


# --- value texts against Python's own correctly rounded formatting --------------


def _float_ref(x: float, scale: int) -> str:
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    text = f"{x:.{scale}f}"
    return text[1:] if text.startswith("-") and set(text[1:]) <= {"0", "."} else text


def _float_column(scale: int, width: int = 64) -> Any:
    columns = [{"name": "k", "type": "int64"}, {"name": "x", "type": f"float{width}", "scale": scale}]
    return parse_contract({"name": "f", "key": ["k"], "columns": columns}).column("x")


ties = st.builds(lambda n, e: n / 2**e, st.integers(-(10**9), 10**9), st.integers(0, 30))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.one_of(st.floats(width=64), ties), min_size=1, max_size=40), scale=st.integers(0, 38))
def test_canonical_float_text_is_correctly_rounded(values: list[float], scale: int) -> None:
    col = _float_column(scale)
    assert value_text(pa.array(values, pa.float64()), col) == [_float_ref(v, scale) for v in values]


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(width=32), min_size=1, max_size=40), scale=st.integers(0, 12))
def test_canonical_float32_text_is_its_exact_value_rounded(values: list[float], scale: int) -> None:
    col = _float_column(scale, 32)
    assert value_text(pa.array(values, pa.float32()), col) == [_float_ref(v, scale) for v in values]


@pytest.mark.parametrize("scale", [39, 45, 60])
def test_canonical_float_text_at_scales_above_38(scale: int) -> None:
    # The contract allows float scales up to 60; the fast path formats through decimal128(38, scale).
    values = [0.0, -0.0, 1e-300, 0.5, -1.6487185469322154e-26]
    assert value_text(pa.array(values, pa.float64()), _float_column(scale)) == [_float_ref(v, scale) for v in values]


@settings(max_examples=50, deadline=None)
@given(data=st.data(), precision=st.integers(1, 76))
def test_canonical_decimal_text_matches_the_decimal_module(data: Any, precision: int) -> None:
    scale = data.draw(st.integers(0, precision))
    unscaled = data.draw(st.lists(st.integers(-(10**precision) + 1, 10**precision - 1), min_size=1, max_size=30))
    ctx = Context(prec=200)
    values = [Decimal(u).scaleb(-scale, context=ctx) for u in unscaled]
    col = parse_contract(
        {"name": "d", "key": ["k"], "columns": [{"name": "k", "type": "int64"}, {"name": "x", "type": "decimal", "precision": precision, "scale": scale}]}
    ).column("x")
    expected = []
    for v in values:
        text = format(v.quantize(Decimal(1).scaleb(-scale), context=ctx), "f")
        expected.append(text[1:] if v == 0 and text.startswith("-") else text)
    assert value_text(pa.array(values, col.arrow_type), col) == expected


@pytest.mark.parametrize(
    ("scale", "value", "expected"),
    [
        (35, "0.0000001", "0.0000001" + "0" * 28),
        (38, "-0.00000012345678901234567890123456789", "-0.00000012345678901234567890123456789" + "000"),
    ],
)
def test_canonical_decimal_tiny_value_at_large_scale(scale: int, value: str, expected: str) -> None:
    # Arrow prints |x| < 1e-6 in scientific notation; the exact fallback must not use the 28-digit default context.
    col = parse_contract(
        {"name": "d", "key": ["k"], "columns": [{"name": "k", "type": "int64"}, {"name": "x", "type": "decimal", "precision": 38, "scale": scale}]}
    ).column("x")
    assert value_text(pa.array([Decimal(value)], col.arrow_type), col) == [expected]


_EXP = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_UNITS = st.sampled_from(list(_EXP))


def _timestamp_column(resolution: str) -> Any:
    columns = [{"name": "k", "type": "int64"}, {"name": "x", "type": "timestamp", "resolution": resolution}]
    return parse_contract({"name": "t", "key": ["k"], "columns": columns}).column("x")


@settings(max_examples=60, deadline=None)
@given(data=st.data(), stored=_UNITS, resolution=_UNITS)
def test_canonical_timestamp_text_is_the_exact_count_or_an_error(data: Any, stored: str, resolution: str) -> None:
    # Python-datetime range (years 1..9999) and int64 after rescaling; the ranges beyond are the regression test below.
    per_second = 10 ** _EXP[stored]
    lo, hi = max(-62_135_596_800 * per_second, -(2**63 - 1)), min(253_402_300_799 * per_second, 2**63 - 1)
    shift = _EXP[stored] - _EXP[resolution]
    if shift < 0:
        lo, hi = max(lo, -(2**63 - 1) // 10 ** (-shift)), min(hi, (2**63 - 1) // 10 ** (-shift))
    factor = 10 ** max(shift, 0)
    exact = st.integers(-(-lo // factor), hi // factor).map(lambda e: e * factor)  # whole multiples inside [lo, hi]
    epochs = data.draw(st.lists(st.one_of(st.integers(lo, hi), exact), min_size=1, max_size=30))
    values = pa.array(epochs, pa.timestamp(stored, tz="UTC"))
    if all(shift <= 0 or e % 10**shift == 0 for e in epochs):
        expected = [str(e * 10 ** (-shift)) if shift <= 0 else str(e // 10**shift) for e in epochs]
        assert value_text(values, _timestamp_column(resolution)) == expected
    else:
        with pytest.raises(ContractViolationError, match="'x'"):
            value_text(values, _timestamp_column(resolution))


@pytest.mark.parametrize("epoch_ms", [-62_135_596_800_001, 253_402_300_800_001])
def test_canonical_sub_resolution_timestamp_outside_datetime_range_is_a_violation(epoch_ms: int) -> None:
    # Encodable when whole (a plain integer count); the error path must not need a Python datetime.
    whole = (epoch_ms // 1000) * 1000
    assert value_text(pa.array([whole], pa.timestamp("ms", tz="UTC")), _timestamp_column("s")) == [str(whole // 1000)]
    with pytest.raises(ContractViolationError, match="'x'"):
        value_text(pa.array([epoch_ms], pa.timestamp("ms", tz="UTC")), _timestamp_column("s"))
