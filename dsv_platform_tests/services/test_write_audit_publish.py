"""Issue 26 item 14: write-audit-publish on ingest. A load appends to its staging branch, the per-load rules read the branch,
and main is fast-forwarded to the branch only when no blocking rule fails.

A source whose contract blocks test accounts (a population rule); batches land and load as ``dsv ingest`` does, on the
SQLite and the PostgreSQL catalog (real pyiceberg): a blocked load leaves main (snapshot and rows) as it was and its rows
readable on the branch; a passing load moves main to exactly the branch's head and removes the branch, every data file
sealed; an append to main between the branch's commit and the fast-forward makes the load run again on the new main.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
import pytest

from dsv_platform.adapters.iceberg import iceberg_wap as wap
from dsv_platform.adapters.iceberg.iceberg_files import FileDigest, live_files
from dsv_platform.bootstrap import build_landing, build_tables
from dsv_platform.core.config.source import parse_source
from dsv_platform.core.config_yaml import read_yaml
from dsv_platform.core.ingest.batch import batch_of, prepare_batch
from dsv_platform.core.ingest.staging import is_staging_branch
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.services.ingest.canonical_load import load_landed
from dsv_platform_tests.defs.support import settings_at

DAY = dt.date(2026, 1, 10)
SOURCE = CONFIG_DIR / "sources" / "account_features.yaml"
FEATURES = parse_source({**read_yaml(SOURCE), "expectations": {"population": [{"column": "account_id", "not_matching": "^test_"}]}}, file=SOURCE)


class Ledger:
    """The platform's file ledger, in memory: the digest of every data file a commit added (iceberg_files.FileLedger)."""

    def __init__(self) -> None:
        self.paths: dict[str, set[str]] = {}

    def known_paths(self, table: str) -> set[str] | None:
        return self.paths.get(table)

    def ready(self) -> None:
        """Nothing to sign in memory: always ready."""

    def record(self, table: str, digests: Sequence[FileDigest], *, backfilled: int) -> None:
        self.paths.setdefault(table, set()).update(d.path for d in digests)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def home(request, tmp_path):
    settings = settings_at(tmp_path / "home")
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        settings = dataclasses.replace(settings, iceberg_catalog_url=server.url(server.create_database()))
    landing, tables = build_landing(settings), build_tables(settings)
    tables.ledger = Ledger()
    return landing, tables


def _batch(name: str, accounts: Sequence[str], hour: int):
    table = pa.table(
        {
            "account_id": pa.array(list(accounts), pa.string()),
            "feature_date": pa.array([DAY] * len(accounts), pa.date32()),
            "txn_count_7d": pa.array([hour] * len(accounts), pa.int32()),
            "amount_sum_7d": pa.array(["10.00"] * len(accounts), pa.string()),
            "card_present_ratio_7d": pa.array([0.5] * len(accounts), pa.float64()),
            "feature_version": pa.array([1] * len(accounts), pa.int32()),
        }
    )
    return batch_of(table, source=FEATURES.name, day=DAY, batch_id=name, recorded_at=dt.datetime(2026, 1, 11, hour, tzinfo=dt.UTC))


def _ingest(home, name: str, accounts: Sequence[str], hour: int):
    landing, tables = home
    landing.land(_batch(name, accounts, hour), FEATURES)
    return load_landed(landing, tables, FEATURES, DAY)


def _accounts(tables, **read) -> list[str]:
    return sorted(tables.read(FEATURES, partition=DAY, **read).column("account_id").to_pylist())


def _staging(tables) -> dict[str, int]:
    return {name: ref.snapshot_id for name, ref in tables.table(FEATURES).refs().items() if is_staging_branch(name)}


def _sealed(tables) -> None:
    """Every data file main reads has the digest the platform recorded when it wrote it (a build refuses an unknown one)."""
    tbl = tables.table(FEATURES)
    assert {f.path for f in live_files(tbl, None)} <= tables.ledger.paths[FEATURES.name]


def test_a_blocked_load_leaves_main_unchanged_and_its_rows_on_the_branch(home):
    _, tables = home
    good = _ingest(home, "good", ["acct_0", "acct_1"], 1)
    main = tables.current_snapshot_id(FEATURES)
    assert good.staged is None and good.snapshot_id == main and not _staging(tables)
    bad = _ingest(home, "leak", ["acct_2", "test_0", "test_1"], 2)
    [failed] = [r for r in bad.semantic if not r.passed]
    assert failed.rule == "population" and failed.blocking and failed.observed.startswith("2 rows")
    assert tables.current_snapshot_id(FEATURES) == main and bad.snapshot_id == main, "main must not move"
    assert _accounts(tables) == ["acct_0", "acct_1"] and tables.read(FEATURES, history=True).num_rows == 2
    assert bad.digest == good.digest  # the day's data version: main's, unchanged
    assert bad.staged is not None and is_staging_branch(bad.staged)
    assert _staging(tables) == {bad.staged: bad.staged_snapshot_id}
    assert tables.snapshot_parent(FEATURES, bad.staged_snapshot_id) == main
    assert _accounts(tables, snapshot_id=bad.staged_snapshot_id) == ["acct_0", "acct_1", "acct_2", "test_0", "test_1"]
    again = load_landed(*home, FEATURES, DAY)  # the same batches again: the same branch, main still unchanged
    assert again.staged == bad.staged and tables.current_snapshot_id(FEATURES) == main and list(_staging(tables)) == [bad.staged]


def test_a_blocked_first_load_of_an_empty_table_leaves_no_main(home):
    _, tables = home
    bad = _ingest(home, "leak", ["test_0"], 1)
    assert bad.staged is not None and tables.current_snapshot_id(FEATURES) is None and _accounts(tables) == []
    assert _accounts(tables, snapshot_id=bad.staged_snapshot_id) == ["test_0"]


def test_a_passing_load_moves_main_to_exactly_the_branch_head_and_removes_the_branch(home, monkeypatch):
    _, tables = home
    _ingest(home, "first", ["acct_0", "acct_1"], 1)
    before = tables.current_snapshot_id(FEATURES)
    published: list[tuple[str, int | None]] = []
    real = wap.publish

    def publish(tables_, spec, name, head, made):
        assert _staging(tables_) == {name: head} and tables_.current_snapshot_id(spec) == before  # staged, not yet on main
        published.append((name, head))
        return real(tables_, spec, name, head, made)

    monkeypatch.setattr(wap, "publish", publish)
    load = _ingest(home, "second", ["acct_1", "acct_2"], 2)
    [(_, head)] = published
    assert load.staged is None and load.snapshot_id == head == tables.current_snapshot_id(FEATURES)
    assert tables.snapshot_parent(FEATURES, head) == before and not _staging(tables), "branch removed"
    assert [b.outcome.snapshot_id for b in load.batches if b.outcome.appended] == [head]  # the ids lineage records are main's
    assert _accounts(tables) == ["acct_0", "acct_1", "acct_2"]
    _sealed(tables)
    assert tables.table(FEATURES).current_snapshot().summary["dsv.batches"]
    monkeypatch.undo()
    again = load_landed(*home, FEATURES, DAY)  # re-loading the same batches: a no-op on main, no branch left
    assert tables.current_snapshot_id(FEATURES) == head and again.snapshot_id == head and not _staging(tables)
    assert all(b.outcome.already_applied for b in again.batches)


def test_an_append_to_main_before_the_fast_forward_makes_the_load_run_again_on_the_new_main(home, monkeypatch):
    _, tables = home
    _ingest(home, "first", ["acct_0"], 1)
    calls: list[bool] = []
    real, concurrent = wap.publish, []

    def publish(tables_, spec, name, head, made):
        if not calls:  # another writer commits to main between the branch's commit and the fast-forward
            other = _batch("other", ["acct_9"], 3)
            concurrent.append(tables_.append(spec, prepare_batch(other.data, spec).accepted, recorded_at=other.recorded_at, batch="other").snapshot_id)
        calls.append(real(tables_, spec, name, head, made))
        return calls[-1]

    monkeypatch.setattr(wap, "publish", publish)
    load = _ingest(home, "second", ["acct_1", "acct_2"], 2)
    assert calls == [False, True], "the first fast-forward is refused (main moved), the second lands"
    main = tables.current_snapshot_id(FEATURES)
    assert load.staged is None and load.snapshot_id == main
    assert concurrent[0] in wap.ancestry(tables.table(FEATURES), main), "main's new head descends from the concurrent append"
    assert _accounts(tables) == ["acct_0", "acct_1", "acct_2", "acct_9"], "no row lost"
    assert not _staging(tables)
    _sealed(tables)


def test_a_privacy_deletion_removes_a_staging_branch_holding_the_subject(home):
    """A blocked load's rows are a copy too: erasing a subject removes the branch that holds them and expires its snapshot."""
    from dsv_platform.services.privacy.privacy_canonical import delete_canonical

    _, tables = home
    _ingest(home, "good", ["acct_0"], 1)
    bad = _ingest(home, "leak", ["acct_1", "test_0"], 2)
    detail = delete_canonical(tables, FEATURES, "test_0", {})
    assert detail["removed_staging_branches"] == [bad.staged] and not _staging(tables)
    assert bad.staged_snapshot_id in detail["expired_snapshots"] and tables.table(FEATURES).snapshot_by_id(bad.staged_snapshot_id) is None
    assert tables.snapshots_matching(FEATURES, ("account_id", "test_0")) == []
    assert _accounts(tables) == ["acct_0"]


def test_a_day_failing_on_main_with_nothing_new_leaves_no_branch(home):
    """Rows written before write-audit-publish can fail a rule on main itself: the check fails as before, nothing is staged."""
    landing, tables = home
    batch = _batch("old", ["acct_0", "test_0"], 1)
    record = landing.land(batch, FEATURES)
    tables.append(FEATURES, prepare_batch(batch.data, FEATURES).accepted, recorded_at=batch.recorded_at, batch=record.batch_ref)  # straight to main
    main = tables.current_snapshot_id(FEATURES)
    load = load_landed(landing, tables, FEATURES, DAY)
    assert not all(r.passed for r in load.semantic if r.blocking) and load.batches[0].outcome.already_applied
    assert load.staged is None and load.snapshot_id == main == tables.current_snapshot_id(FEATURES) and not _staging(tables)
