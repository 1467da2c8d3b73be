"""Issue 24 item 8 (c): ``integrity:raw_agreement`` compares the canonical rows a build reads with their raw batches.

On the real registries (SQLite and PostgreSQL), a real Iceberg catalog and ``dsv build`` (a Dagster run): an insider
multiplies the amounts of a canonical Parquet file by 100 in the warehouse *and* rewrites the file's recorded digest
(re-signed with the writing identity's key, so the pinned-file check of part (b) passes), one honest batch lands, and
the rebuild's signal fails naming the batch and the column; with it in ``integrity.blocking`` the build fails. An
honest build, and one over a correction (a later batch with new values for the same keys), pass with ``evaluated``;
rows appended under a batch that never landed fail it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsv_platform.adapters.iceberg.iceberg_files import file_digest, live_files
from dsv_platform.adapters.iceberg.iceberg_maintenance import local_path
from dsv_platform.adapters.registry.data_files import statement
from dsv_platform.adapters.registry.signed_events import policy_of
from dsv_platform.cli.main import main
from dsv_platform.core.trust import events as ev
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.examples.fraud.events import buggy_feature_batch, feature_backfill
from dsv_platform.services.publication.integrity_signals import stored_integrity_gates
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.data_files import check_snapshot
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_canonical_digests import DAYS, Home, rewrite_amounts
from dsv_platform_tests.services.test_publisher import backend_url
from dsv_platform_tests.services.test_trust import settings_for

__all__ = ["backend_url"]
SIGNAL = "integrity:raw_agreement"


@pytest.fixture
def home(backend_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    v6 = config / "datasets" / "fraud_training_set_v6.yaml"
    text = v6.read_text().replace("rows_at_least: 100", "rows_at_least: 50")
    for bound in ("      typical: {p50: [5, 200], p99: [50, 5000]}", "      drift: {p99_max_change: 1.0}"):
        assert bound in text
        text = text.replace(bound, "")  # amount's plausibility bounds catch this x100 too: without them, only raw_agreement does
    v6.write_text(text)
    settings = settings_for(tmp_path / "home", backend_url, DSV_CONFIG_DIR=str(config))
    for name, value in (("DSV_HOME", str(settings.home)), ("DSV_REGISTRY_URL", backend_url), ("DSV_CONFIG_DIR", str(config))):
        monkeypatch.setenv(name, value)
    world = World.create(settings=settings, days=0)
    trust.current_identity(world.platform)  # admin: loads and builds as a proven identity
    h = Home(world, backend_url)
    for i in range(DAYS):
        h.ingest_day(i)
    yield h
    world.platform.close()


def dsv_build(home: Home, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """``dsv build fraud_training_set:v6 --json``: the realization's signal gate (its detail) from the stored quality report."""
    assert main(["build", "fraud_training_set:v6", "--json"]) == 0, capsys.readouterr().err
    built = json.loads(capsys.readouterr().out)
    gate = next(g for g in stored_integrity_gates(home.world.platform, built["manifest_hash"]) if g.name == SIGNAL)
    return {"passed": gate.passed, "blocking": gate.blocking, **gate.detail}


def forge_digest_row(home: Home, path: str) -> None:
    """The insider with the writing identity's key: the file's digest row rewritten to the tampered file, signed anew."""
    tbl = home.world.platform.tables.load("transactions")
    sha, size = file_digest(tbl, path)
    with home.world.registry.engine.connect() as conn:
        from sqlalchemy import text

        sid = conn.execute(text("SELECT snapshot_id FROM data_file_digests WHERE path = :p"), {"p": path}).scalar_one()
    signer = policy_of(home.world.registry.engine).signer
    assert signer is not None
    signature = signer.sign(ev.signed_bytes(statement("transactions", path, sha, size, str(sid)))).hex()
    home.sql(f"UPDATE data_file_digests SET sha256 = '{sha}', size = {size}, signature = '{signature}' WHERE path = '{path}'")


def test_an_honest_build_and_a_correction_agree_with_their_raw_batches(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    gate = dsv_build(home, capsys)
    assert gate["passed"] and gate["evaluated"] is True and not gate["blocking"], gate
    assert int(str(gate["batches"])) >= DAYS * 2 and int(str(gate["rows"])) > 0 and gate["found"] is None
    day = home.world.domain.days(DAYS)[1]
    home.world.ingest([buggy_feature_batch(home.world.domain, day)])  # the features of a day as a buggy job made them,
    home.world.ingest(feature_backfill(home.world.domain, day, day, recorded_on=home.world.domain.days(DAYS + 2)[-1]))  # then corrected
    corrected = dsv_build(home, capsys)
    assert corrected["passed"] and corrected["evaluated"] is True and int(str(corrected["batches"])) > int(str(gate["batches"])), corrected


def test_a_file_rewritten_with_prices_times_100_and_its_digest_forged_fails_the_signal(home: Home, capsys: pytest.CaptureFixture[str]) -> None:
    tables = home.world.platform.tables
    assert dsv_build(home, capsys)["passed"]
    victim = live_files(tables.load("transactions"), None)[0].path
    local = local_path(victim)
    assert local is not None
    (batch,) = set(pq.read_table(local, columns=["_batch"]).column("_batch").to_pylist())
    rewrite_amounts(victim, factor=100)
    forge_digest_row(home, victim)
    home.ingest_day(DAYS)  # one honest new batch
    tbl = tables.load("transactions")
    check_snapshot(home.world.platform, "transactions", tbl.current_snapshot().snapshot_id)  # part (b) cannot tell: the digest row was forged

    gate = dsv_build(home, capsys)  # a warning by default: the realization publishes, the signal fails
    assert not gate["passed"] and gate["evaluated"] is True and gate["disagree"] == 1 and gate["columns"] == "transactions.amount", gate
    assert f"transactions:{batch}: " in str(gate["found"]) and "amount differs in" in str(gate["found"]), gate

    datasets = Path(home.world.settings.config_dir) / "datasets"
    v7 = (datasets / "fraud_training_set_v6.yaml").read_text().replace("version: v6", "version: v7")
    (datasets / "fraud_training_set_v7.yaml").write_text(v7 + "integrity: {blocking: [raw_agreement]}\n")  # the recipe: a new version
    assert main(["build", "fraud_training_set:v7"]) != 0
    err = capsys.readouterr().err
    assert "blocking gate(s) failed: " in err and SIGNAL in err, err


def test_rows_appended_under_a_batch_that_never_landed_fail_the_signal(home: Home) -> None:
    """A writer with the service's table credentials appends rows as an invented batch: its digests are honest, no raw batch exists."""
    import datetime as dt

    spec = home.world.platform.config.sources["transactions"]
    rows = home.world.platform.tables.read(spec).slice(0, 5)
    home.world.platform.tables.append(spec, rows.set_column(0, rows.schema.field(0), pc.add(rows.column(0), 9_000_000)),
                                      recorded_at=dt.datetime(2026, 6, 10, tzinfo=dt.UTC), batch="forged@" + "0" * 64)  # fmt: skip
    gate = next(g for g in home.world.build().gates if g.name == SIGNAL)
    assert not gate.passed and gate.detail["disagree"] == 1, gate.detail
    assert str(gate.detail["found"]) == f"transactions:forged@{'0' * 64}: no raw batch of this source landed under this ref (5 canonical rows)"

