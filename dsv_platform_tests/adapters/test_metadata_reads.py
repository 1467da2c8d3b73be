"""Issue 22 item 1: reads that need no data scan, and the latest-per-key and duplicate passes that gather wide rows once.

The watermark comes from the manifests' ``_recorded_at`` bounds and must equal the maximum a scan of the whole history
gives, on real Iceberg tables (SQLite and PostgreSQL catalogs), also after a row-level delete rewrote files. The two
vectorized passes are checked against plain-Python references on generated tables with ties and nulls.
"""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg_maintenance import max_recorded_at
from dsv_platform.adapters.iceberg.iceberg_values import BATCH, RECORDED_AT, latest_per_key
from dsv_platform.core.ingest.batch import _drop_duplicates_by_rows, _drop_exact_duplicates, prepare_batch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.adapters.test_iceberg import tables

DOMAIN = FraudDomain(rows_per_day=120)


__all__ = ["tables"]  # the canonical tables on a SQLite and a PostgreSQL catalog, as test_iceberg builds them


def _scanned(tables, snapshot_id):
    return pc.max(tables.read(TRANSACTIONS, snapshot_id=snapshot_id, history=True).column(RECORDED_AT)).as_py()


def test_the_watermark_from_manifest_bounds_equals_a_scan_of_the_history(tables):
    snapshots = []
    for offset in range(3):
        day = DOMAIN.start + dt.timedelta(days=offset)
        batch = events.daily_batch(DOMAIN, "transactions", day)
        tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=batch.batch_id)
        snapshots.append(tables.current_snapshot_id(TRANSACTIONS))
    late = events.late_transactions(DOMAIN, DOMAIN.start, arrived=DOMAIN.start + dt.timedelta(days=9), count=5)
    tables.append(TRANSACTIONS, prepare_batch(late.data, TRANSACTIONS).accepted, recorded_at=late.recorded_at, batch=late.batch_id)
    snapshots.append(tables.current_snapshot_id(TRANSACTIONS))
    for sid in snapshots:  # every pinned snapshot, not only the newest
        assert max_recorded_at(tables, TRANSACTIONS, sid) == _scanned(tables, sid)
    assert max_recorded_at(tables, TRANSACTIONS, snapshots[-1]) == late.recorded_at
    assert max_recorded_at(tables, TRANSACTIONS, snapshots[0]) < late.recorded_at
    # the late batch's rows deleted (a privacy deletion rewrites files): the bound follows the live rows
    tables.delete_rows(TRANSACTIONS, (BATCH, late.batch_id))
    after = tables.current_snapshot_id(TRANSACTIONS)
    assert max_recorded_at(tables, TRANSACTIONS, after) == _scanned(tables, after) < late.recorded_at


def test_an_empty_snapshot_has_no_watermark(tables):
    batch = events.daily_batch(DOMAIN, "transactions", DOMAIN.start)
    tables.append(TRANSACTIONS, prepare_batch(batch.data, TRANSACTIONS).accepted, recorded_at=batch.recorded_at, batch=batch.batch_id)
    tables.delete_rows(TRANSACTIONS, (BATCH, batch.batch_id))
    assert max_recorded_at(tables, TRANSACTIONS, tables.current_snapshot_id(TRANSACTIONS)) is None


def _latest_reference(rows: pa.Table, key: tuple[str, ...]) -> list[dict]:
    """Per key the row with the greatest (_recorded_at, _batch), the first such row on a tie; sorted by key."""
    best: dict[tuple, tuple[tuple, int]] = {}
    records = rows.to_pylist()
    for i, r in enumerate(records):
        k = tuple(r[c] for c in key)
        rank = (r[RECORDED_AT], r[BATCH])
        if k not in best or rank > best[k][0]:
            best[k] = (rank, i)
    return [records[best[k][1]] for k in sorted(best)]


def test_latest_per_key_equals_the_reference_with_ties():
    rng = np.random.default_rng(7)
    t0 = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    for _ in range(150):
        n = int(rng.integers(1, 300))
        rows = pa.table({
            "a": pa.array([f"k{x}" for x in rng.integers(0, 25, n)]),
            "b": pa.array(rng.integers(0, 3, n), pa.int64()),
            "v": pa.array(np.arange(n, dtype=np.int64)),  # tells tied rows apart
            RECORDED_AT: pa.array([t0 + dt.timedelta(seconds=int(x)) for x in rng.integers(0, 4, n)], pa.timestamp("us", tz="UTC")),
            BATCH: pa.array([f"b{x}" for x in rng.integers(0, 3, n)]),
        })  # fmt: skip
        for key in (("a",), ("a", "b")):
            assert latest_per_key(rows, key).to_pylist() == _latest_reference(rows, key)


def test_dropping_exact_duplicates_keeps_first_occurrences_in_order_like_comparing_rows():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(0, 150))
        raw = pa.table({
            "s": pa.array([None if x == 0 else f"v{x}" for x in rng.integers(0, 4, n)]),
            "i": pa.array([None if x == 0 else int(x) for x in rng.integers(0, 3, n)], pa.int64()),
            "t": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=int(x)) for x in rng.integers(0, 2, n)], pa.timestamp("us", tz="UTC")),
            "d": pa.array([decimal.Decimal(int(x)) / 10 for x in rng.integers(0, 2, n)], pa.decimal128(6, 2)),
        })  # fmt: skip
        kept, dropped = _drop_exact_duplicates(raw)
        reference, ref_dropped = _drop_duplicates_by_rows(raw)
        assert dropped == ref_dropped and kept.to_pylist() == reference.to_pylist()
        seen, expected = set(), []
        for row in raw.to_pylist():
            if tuple(row.values()) not in seen:
                seen.add(tuple(row.values()))
                expected.append(row)
        assert kept.to_pylist() == expected
    floats = pa.table({"f": pa.array([0.0, -0.0, float("nan"), float("nan"), 1.5, 1.5])})  # Python's ==, not Arrow's grouping
    kept, dropped = _drop_exact_duplicates(floats)
    assert dropped == 2 and [str(x) for x in kept.column("f").to_pylist()] == ["0.0", "nan", "nan", "1.5"]


def test_rows_not_in_equals_comparing_row_tuples_with_nulls_signed_zeros_and_nans():
    from dsv_platform.adapters.iceberg.iceberg_values import rows_not_in

    rng = np.random.default_rng(5)
    floats = [0.0, -0.0, float("nan"), 2.5, None]
    for _ in range(200):
        def table(n):
            return pa.table({
                "s": pa.array([None if x == 0 else f"v{x}" for x in rng.integers(0, 3, n)], pa.string()),
                "f": pa.array([floats[x] for x in rng.integers(0, len(floats), n)], pa.float64()),
                "d": pa.array([dt.date(2026, 6, 1 + int(x)) for x in rng.integers(0, 2, n)], pa.date32()),
            })  # fmt: skip
        rows, known = table(int(rng.integers(1, 60))), table(int(rng.integers(1, 60)))
        seen = {tuple(r.values()) for r in known.to_pylist()}  # fresh float objects: NaN matches nothing, as before
        expected = [tuple(r.values()) not in seen for r in rows.to_pylist()]
        assert rows_not_in(rows, known).to_pylist() == expected


def test_a_batch_touching_several_days_reads_only_those_partitions_and_appends_only_changes(tables):
    days = [DOMAIN.start + dt.timedelta(days=k) for k in range(3)]
    batches = [events.daily_batch(DOMAIN, "transactions", d) for d in days]
    for b in batches:
        tables.append(TRANSACTIONS, prepare_batch(b.data, TRANSACTIONS).accepted, recorded_at=b.recorded_at, batch=b.batch_id)
    two_days = pa.concat_tables([prepare_batch(b.data, TRANSACTIONS).accepted for b in batches[:2]])
    resent = tables.append(TRANSACTIONS, two_days, recorded_at=batches[2].recorded_at + dt.timedelta(hours=1), batch="resent-two-days")
    assert (resent.appended, resent.unchanged) == (0, two_days.num_rows)
    changed = two_days.set_column(two_days.schema.get_field_index("amount"), "amount", pc.multiply(two_days.column("amount"), 2))
    fixed = tables.append(TRANSACTIONS, changed.slice(0, 3), recorded_at=batches[2].recorded_at + dt.timedelta(hours=2), batch="fix-three")
    assert (fixed.appended, fixed.unchanged) == (3, 0)
    assert tables.read(TRANSACTIONS).num_rows == sum(prepare_batch(b.data, TRANSACTIONS).accepted.num_rows for b in batches)
