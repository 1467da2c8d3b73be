"""Issue 25 item 7: "as known at T" is a function of the recorded times alone, whatever the order batches land in.

Three batches of one day (recorded t1 < t2 < t3) change some rows and restate others (equal to a version
before them, or to the one just before); each is landed and loaded on its own, as ``dsv ingest`` does,
in every one of the six orders, on the SQLite and on the PostgreSQL catalog.
"""

import dataclasses
import datetime as dt
import itertools

import pyarrow as pa
import pytest

from dsv_platform.bootstrap import build_landing, build_tables
from dsv_platform.core.identity.hashing import hash_table
from dsv_platform.core.ingest.batch import batch_of
from dsv_platform.examples.fraud.specs import ACCOUNT_FEATURES
from dsv_platform.services.ingest.canonical_load import load_landed
from dsv_platform_tests.defs.support import settings_at

DAY = dt.date(2026, 1, 10)
T1, T2, T3 = (dt.datetime(2026, 1, 11, h, tzinfo=dt.UTC) for h in (1, 2, 3))
# txn_count_7d per account in each batch; None: the batch does not mention the account
VALUES = {
    "a": (T1, [1, 1, 1, 1, 1, 1, 1]),
    "b": (T2, [2, 1, 2, 1, None, 2, 1]),  # a0, a2, a5 change; a1, a3, a6 restate a's version
    "c": (T3, [1, 1, 2, 3, 1, 1, 2]),  # a0, a5 go back to a's version; a1, a2, a4 restate; a3, a6 change
}
TIMES = [T1 - dt.timedelta(hours=1), T1, T1 + dt.timedelta(minutes=30), T2, T2 + dt.timedelta(minutes=30), T3, T3 + dt.timedelta(days=1)]


def _batch(name: str):
    recorded, counts = VALUES[name]
    accounts = [(f"acct_{i}", c) for i, c in enumerate(counts) if c is not None]
    table = pa.table(
        {
            "account_id": pa.array([a for a, _ in accounts], pa.string()),
            "feature_date": pa.array([DAY] * len(accounts), pa.date32()),
            "txn_count_7d": pa.array([c for _, c in accounts], pa.int32()),
            "amount_sum_7d": pa.array(["10.00"] * len(accounts), pa.string()),
            "card_present_ratio_7d": pa.array([0.5] * len(accounts), pa.float64()),
            "feature_version": pa.array([1] * len(accounts), pa.int32()),
        }
    )
    return batch_of(table, source=ACCOUNT_FEATURES.name, day=DAY, batch_id=name, recorded_at=recorded)


def _known(settings, order) -> tuple[list[list[tuple[str, int]]], str]:
    landing, tables = build_landing(settings), build_tables(settings)
    for name in order:  # one ingest per batch: land it, then load its day
        landing.land(_batch(name), ACCOUNT_FEATURES)
        load_landed(landing, tables, ACCOUNT_FEATURES, DAY)
    views = []
    for at in TIMES:
        rows = tables.read(ACCOUNT_FEATURES, partition=DAY, as_of=at)
        views.append(sorted(zip(rows.column("account_id").to_pylist(), rows.column("txn_count_7d").to_pylist(), strict=True)))
    if order == ("a", "b", "c"):  # in recorded order: a restated row equal to its latest version is still not written
        assert tables.read(ACCOUNT_FEATURES, history=True).num_rows == 7 + 3 + 4
    now = tables.read(ACCOUNT_FEATURES, partition=DAY)
    return views, hash_table(now, ACCOUNT_FEATURES.contract, partition_by=ACCOUNT_FEATURES.contract.partition_by).content_hash


@pytest.mark.parametrize("catalog", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_as_known_at_t_is_the_same_whatever_the_landing_order(request, tmp_path, catalog):
    expected = [
        [],
        [(f"acct_{i}", 1) for i in range(7)],
        [(f"acct_{i}", 1) for i in range(7)],
        [(f"acct_{i}", c) for i, c in enumerate([2, 1, 2, 1, 1, 2, 1])],
        [(f"acct_{i}", c) for i, c in enumerate([2, 1, 2, 1, 1, 2, 1])],
        [(f"acct_{i}", c) for i, c in enumerate([1, 1, 2, 3, 1, 1, 2])],
        [(f"acct_{i}", c) for i, c in enumerate([1, 1, 2, 3, 1, 1, 2])],
    ]
    hashes = set()
    for n, order in enumerate(itertools.permutations("abc")):
        settings = settings_at(tmp_path / f"home{n}")
        if catalog == "postgres":
            server = request.getfixturevalue("postgres_server")
            settings = dataclasses.replace(settings, iceberg_catalog_url=server.url(server.create_database()))
        views, content_hash = _known(settings, order)
        for at, view, want in zip(TIMES, views, expected, strict=True):
            assert view == want, f"landed in the order {''.join(order)}: as known at {at.isoformat()}"
        hashes.add(content_hash)
    assert len(hashes) == 1
