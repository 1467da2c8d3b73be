"""Issue 24 item 8: canonical data cannot change underneath: each data file's digest is recorded at write and checked when pinned.

On the real registries (SQLite and PostgreSQL) and a real Iceberg catalog: the platform loads and builds as a proven
identity; an insider rewrites a canonical Parquet file in the warehouse (same schema, amounts doubled), an honest batch
lands after it, and the rebuild is refused CORRUPT naming the table and the file; ``dsv verify`` says the same.
A table written before digests were recorded is reported unverified, and its next write records them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlalchemy import text

from dsv_platform.adapters.iceberg.iceberg_files import file_digest, live_files
from dsv_platform.adapters.iceberg.iceberg_maintenance import local_path
from dsv_platform.adapters.registry.data_files import DataFileLedger
from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.errors import AccessDeniedError, DataFileCorruptError, UntrustedError
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.data_files import check_snapshot
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_publisher import backend_url
from dsv_platform_tests.services.test_trust import settings_for

__all__ = ["backend_url"]
DAYS = 3
DAY = FraudDomain(rows_per_day=10).days(1)[0]


@dataclass
class Home:
    world: World
    url: str

    def sql(self, *statements: str) -> None:
        """The insider, straight to the registry: the append-only trigger first."""
        with self.world.registry.engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.execute(text("DROP TRIGGER IF EXISTS data_file_digests_no_update"))
                conn.execute(text("DROP TRIGGER IF EXISTS data_file_digests_no_delete"))
            else:
                conn.execute(text("ALTER TABLE data_file_digests DISABLE TRIGGER data_file_digests_append_only"))
            for stmt in statements:
                conn.execute(text(stmt))

    def ingest_day(self, index: int) -> None:
        day = self.world.domain.days(index + 1)[index]
        self.world.ingest([daily_batch(self.world.domain, s, day) for s in SOURCES])


@pytest.fixture
def home(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    settings = settings_for(tmp_path / "home", backend_url)
    monkeypatch.setenv("DSV_HOME", str(settings.home))
    monkeypatch.setenv("DSV_REGISTRY_URL", backend_url)
    world = World.create(settings=settings, days=0)  # nothing asks who acts: the first write proves admin's key, which signs every digest
    h = Home(world, backend_url)
    for i in range(DAYS):
        h.ingest_day(i)
    yield h
    world.platform.close()


def rewrite_amounts(path: str, *, factor: int = 2) -> None:
    """An insider's edit of a Parquet data file in place: same schema, every amount doubled (within every gate: only the digest tells)."""
    local = local_path(path)
    assert local is not None
    rows = pq.read_table(local)
    i = rows.schema.get_field_index("amount")
    scaled = pc.multiply(rows.column(i), pa.scalar(factor, rows.schema.field(i).type)).cast(rows.schema.field(i).type)
    pq.write_table(rows.set_column(i, rows.schema.field(i), scaled), local)


def test_every_file_the_platform_writes_has_a_signed_digest_and_a_clean_build_verifies(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    tables = home.world.platform.tables
    with home.world.registry.engine.connect() as conn:
        recorded = {(r.table_name, r.path): (r.sha256, r.size, r.signer) for r in conn.execute(text("SELECT * FROM data_file_digests"))}
    for name in ("transactions", "chargebacks", "account_features"):
        tbl = tables.load(name)
        for f in live_files(tbl, None):
            assert recorded[(name, f.path)] == (*file_digest(tbl, f.path), "admin")
    build = home.world.build()
    assert main(["verify", build.ref, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["data_files"]["files"] >= DAYS * 2 and doc["data_files"]["unverified"] == [] and doc["data_files"]["not_checked"] == []
    assert any(e["action"] == "canonical.seal" and e["target"] == "table:transactions" for e in trust.records(home.world.platform).audit_entries())


def test_a_rewritten_data_file_then_an_honest_batch_the_rebuild_is_corrupt(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    first = home.world.build()
    victim = live_files(home.world.platform.tables.load("transactions"), None)[0].path
    rewrite_amounts(victim)
    home.ingest_day(DAYS)  # one honest new batch: it records only the files it wrote
    with pytest.raises(DataFileCorruptError) as caught:
        home.world.build()
    message = str(caught.value)
    assert message.startswith("CORRUPT: transactions: data file ") and victim in message and "changed in the warehouse" in message, message
    assert caught.value.exit_code == 6 and caught.value.detail["path"] == victim
    assert main(["verify", first.ref]) == 6  # the first realization pinned that file too
    err = capsys.readouterr().err
    assert "CORRUPT: transactions: data file" in err and victim in err, err


def test_a_deleted_or_edited_digest_row_is_refused(home: Home) -> None:
    tbl = home.world.platform.tables.load("transactions")
    sid, victim = tbl.current_snapshot().snapshot_id, live_files(tbl, None)[0].path
    home.sql(f"UPDATE data_file_digests SET sha256 = '{'0' * 64}' WHERE path = '{victim}'")
    with pytest.raises(UntrustedError, match="its recorded digest is not what 'admin' signed"):
        check_snapshot(home.world.platform, "transactions", sid)
    home.sql(f"DELETE FROM data_file_digests WHERE path = '{victim}'")
    with pytest.raises(DataFileCorruptError, match="has no recorded digest, though the platform records one"):
        check_snapshot(home.world.platform, "transactions", sid)
    home.sql("DELETE FROM data_file_digests WHERE table_name = 'transactions'")  # every row: the audit log still says it was sealed
    with pytest.raises(DataFileCorruptError, match="has no recorded digest"):
        check_snapshot(home.world.platform, "transactions", sid)


def test_a_platform_that_loads_before_anything_asks_who_acts_signs_every_digest(tmp_path: Path) -> None:
    """The first load of a fresh home, then the first load of a second platform on it (a new process): every digest is signed by
    the identity that acts. Unsigned, the first made a table's first files unsigned, the second made the table UNTRUSTED."""
    settings = load_settings({}).with_home(tmp_path / "home")
    World.create(settings=settings, days=1).platform.close()
    second = World.create(settings=settings, days=0)
    day = second.domain.days(2)[1]
    second.ingest([daily_batch(second.domain, s, day) for s in SOURCES])
    signers = {spec.name: {d.signer for d in DataFileLedger.of(second.registry).digests(spec.name)[1].values()} for spec in SOURCES.values()}
    assert signers["transactions"] and {s for by in signers.values() for s in by} == {"admin"}, signers
    assert second.build().manifest.rows > 0  # the pinned files check against their signed digests
    second.platform.close()


def test_a_table_written_before_digests_is_unverified_until_its_next_write(backend_url: str, tmp_path: Path) -> None:
    world = World.create(settings=settings_for(tmp_path / "home", backend_url), days=0)
    try:
        ledger, world.platform.tables.ledger = world.platform.tables.ledger, None  # as code from before digests wrote it
        world.ingest([daily_batch(world.domain, s, d) for d in world.domain.days(2) for s in SOURCES])
        world.platform.tables.ledger = ledger
        tbl = world.platform.tables.load("transactions")
        check = check_snapshot(world.platform, "transactions", tbl.current_snapshot().snapshot_id)
        assert check.files == 0 and len(check.unverified) == len(live_files(tbl, None)) > 0
        day = world.domain.days(3)[2]
        world.ingest([daily_batch(world.domain, "transactions", day)])  # the next write records every live file (trust on first use)
        tbl = world.platform.tables.load("transactions")
        check = check_snapshot(world.platform, "transactions", tbl.current_snapshot().snapshot_id)
        assert check.unverified == [] and check.files == len(live_files(tbl, None))
    finally:
        world.platform.close()


def test_a_strict_home_without_an_identity_refuses_a_load_before_it_commits(tmp_path: Path) -> None:
    """No identity to sign the digests: the load stops before its commit (the table gains no snapshot and no unsigned digest)."""
    settings = settings_for(tmp_path / "home", None, DSV_STRICT="1")
    with build_platform(settings) as p:
        p.landing.land(daily_batch(FraudDomain(rows_per_day=10), "transactions", DAY), SOURCES["transactions"])
        with pytest.raises(AccessDeniedError, match="strict home needs an identity"):
            load_partition(p, SOURCES["transactions"], DAY)
        assert not p.tables.exists(SOURCES["transactions"]) or p.tables.load("transactions").snapshots() == []  # not even on a staging branch
        assert DataFileLedger.of(p.registry).known_paths("transactions") is None
