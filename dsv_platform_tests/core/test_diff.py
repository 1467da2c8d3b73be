"""The pure diff (core/diff/diff.py, diff_report.py) against an independent pandas merge, on keys and types of every kind."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dsv_platform.core.diff.diff import DiffError, diff_rows, packed_keys, split_reassignments
from dsv_platform.core.diff.diff_report import compare_partitions
from dsv_platform.core.publication.manifest import PartitionEntry


def _oracle(a: pd.DataFrame, b: pd.DataFrame, key: list[str]) -> dict[str, object]:
    """Added/removed/changed and per-column counts by an outer pandas merge (null == null, NaN == NaN)."""
    m = a.merge(b, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"]
    columns = {}
    changed = np.zeros(len(both), dtype=bool)
    for c in [c for c in a.columns if c in b.columns and c not in key]:
        va, vb = both[f"{c}_a"].astype(object), both[f"{c}_b"].astype(object)
        same = np.array([(x == y) or (pd.isna(x) and pd.isna(y)) for x, y in zip(va, vb, strict=True)], dtype=bool)
        columns[c] = int((~same).sum())
        changed |= ~same
    return {
        "added": int((m["_merge"] == "right_only").sum()),
        "removed": int((m["_merge"] == "left_only").sum()),
        "changed": int(changed.sum()),
        "columns": columns,
        "changed_keys": set(map(tuple, both.loc[changed, key].itertuples(index=False))),
    }


def _world(n: int, seed: int, key_kind: str) -> tuple[pa.Table, pa.Table, list[str]]:
    """Two random versions of one table: some rows dropped, some added, some values edited, shuffled order."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n * 3)[:n]
    if key_kind == "int":
        keys, key = {"id": ids.astype(np.int64)}, ["id"]
    elif key_kind == "string":
        keys, key = {"id": np.array([f"r-{i:06d}" for i in ids], dtype=object)}, ["id"]
    else:
        keys, key = (
            {"shop": np.array([f"s{i % 7}" for i in ids], dtype=object), "day": [dt.date(2026, 1, 1) + dt.timedelta(days=int(i // 7)) for i in ids]},
            ["shop", "day"],
        )
    x = rng.normal(size=n)
    x[rng.random(n) < 0.05] = np.nan
    a = pd.DataFrame({**keys, "x": x, "s": rng.choice(["u", "v", None], n), "flag": rng.random(n) < 0.3, "q": rng.integers(0, 5, n)})
    b = a.copy()
    edit = rng.random(n) < 0.1
    b.loc[edit, "x"] = b.loc[edit, "x"] + 1.0
    b.loc[rng.random(n) < 0.05, "s"] = "w"
    flip = rng.random(n) < 0.07
    b.loc[flip, "flag"] = ~b.loc[flip, "flag"]
    b = b[rng.random(n) > 0.08]  # removed rows
    extra = a.sample(frac=0.1, random_state=seed).copy()
    for k in key:
        extra[k] = extra[k].map(
            lambda v: v + 10 * n if isinstance(v, (int, np.integer)) else (f"new-{v}" if isinstance(v, str) else v + dt.timedelta(days=10_000))
        )
    b = pd.concat([b, extra]).sample(frac=1.0, random_state=seed + 1)
    return pa.Table.from_pandas(a, preserve_index=False), pa.Table.from_pandas(b, preserve_index=False), key


@pytest.mark.parametrize("key_kind", ["int", "string", "composite"])
@pytest.mark.parametrize("seed", [1, 2])
def test_diff_rows_matches_a_pandas_merge(key_kind: str, seed: int) -> None:
    a, b, key = _world(3_000, seed, key_kind)
    diff = diff_rows(a, b, key, label_columns=["flag"], examples=5_000)
    want = _oracle(a.to_pandas(), b.to_pandas(), key)
    assert (diff.added.count, diff.removed.count, diff.changed.count) == (want["added"], want["removed"], want["changed"])
    assert diff.added.count > 0 and diff.removed.count > 0 and diff.changed.count > 0
    assert dict(diff.columns) == want["columns"]
    as_tuple = (lambda k: (k,)) if len(key) == 1 else (lambda k: tuple(k[c] for c in key))
    got = {as_tuple(k) for k in diff.changed.examples}
    expect = {tuple(str(v) if isinstance(v, dt.date) else v for v in k) for k in want["changed_keys"]}  # type: ignore[attr-defined]
    assert got == expect
    pa_, pb = a.to_pandas(), b.to_pandas()
    m = pa_.merge(pb, on=key, suffixes=("_a", "_b"))
    (flips,) = diff.flips
    assert flips.up.count == int((~m["flag_a"] & m["flag_b"]).sum()) and flips.down.count == int((m["flag_a"] & ~m["flag_b"]).sum())
    assert flips.up.count + flips.down.count == diff.columns["flag"]


def test_identical_tables_in_any_row_order_have_no_difference() -> None:
    a, _, key = _world(500, 3, "string")
    diff = diff_rows(a, a.take(pa.array(np.random.default_rng(0).permutation(a.num_rows))), key)
    assert (diff.added.count, diff.removed.count, diff.changed.count, diff.matched) == (0, 0, 0, a.num_rows)
    assert set(diff.columns.values()) == {0}
    empty = a.schema.empty_table()  # all partitions equal: nothing read on either side
    nothing = diff_rows(empty, empty, key, label_columns=["flag"])
    assert (nothing.matched, nothing.added.count, nothing.flips[0].up.count) == (0, 0, 0)
    only_new = diff_rows(empty, a, key)
    assert (only_new.added.count, only_new.removed.count) == (a.num_rows, 0)


def test_packed_keys_are_equal_exactly_when_the_keys_are() -> None:
    a = pa.table({"k1": ["x", "x", "y", "y"], "k2": [1, 2, 1, 2]})
    b = pa.table({"k1": ["y", "x", "z"], "k2": [1, 2, 1]})
    ka, kb = packed_keys(a, b, ["k1", "k2"])
    assert len(set(ka.tolist())) == 4
    assert kb[0] == ka[2] and kb[1] == ka[1] and kb[2] not in set(ka.tolist())


def test_schema_changes_are_reported_and_mixed_types_compared() -> None:
    a = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array([1, 2, 3], pa.int32()), "gone": [1, 1, 1]})
    b = pa.table({"id": pa.array([3, 2, 1], pa.int64()), "v": pa.array([3, 5, 1], pa.int64()), "new": ["a", "b", "c"]})
    diff = diff_rows(a, b, ["id"])
    assert diff.columns == {"v": 1} and diff.changed.examples == (2,)
    assert diff.only_in_a == ("gone",) and diff.only_in_b == ("new",)


def test_a_duplicate_key_or_a_missing_key_column_is_a_typed_error() -> None:
    a = pa.table({"id": [1, 2, 2], "v": [0, 0, 0]})
    b = pa.table({"id": [1, 2], "v": [0, 1]})
    for left, right in ((a, b), (b, a)):
        with pytest.raises(DiffError, match="twice") as err:
            diff_rows(left, right, ["id"])
        assert err.value.exit_code == 12
    with pytest.raises(DiffError, match="missing"):
        diff_rows(b, b.rename_columns(["key", "v"]), ["id"])
    with pytest.raises(DiffError, match="label column"):
        diff_rows(b, b, ["id"], label_columns=["nope"])


def test_split_reassignments_count_moves_by_example() -> None:
    a = pa.table({"id": [1, 2, 3, 4, 5], "split": ["train", "train", "test", "validation", "train"]})
    b = pa.table({"id": [5, 4, 3, 2, 6], "split": ["test", "validation", "train", "train", "train"]})
    moves = split_reassignments(a, b, ["id"])
    assert moves.count == 2 and dict(moves.moves) == {"test->train": 1, "train->test": 1} and set(moves.examples) == {3, 5}


def test_partition_comparison_by_leaf_hash() -> None:
    def part(key: str, digit: str, rows: int) -> PartitionEntry:
        return PartitionEntry(key=key, hash=digit * 64, rows=rows, object="f" * 64, bytes=1)

    got = compare_partitions([part("d=1", "a", 3), part("d=2", "b", 4), part("d=3", "c", 1)], [part("d=1", "a", 3), part("d=2", "e", 5), part("d=4", "c", 2)])
    assert [(p.key, p.status, p.rows_a, p.rows_b) for p in got] == [
        ("d=1", "equal", 3, 3),
        ("d=2", "changed", 4, 5),
        ("d=3", "only_in_a", 1, None),
        ("d=4", "only_in_b", None, 2),
    ]
