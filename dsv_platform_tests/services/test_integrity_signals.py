"""Integrity signals computed by real builds (issue 16 part 5): label changes concentrated in one batch block the
build when configured; a pinned snapshot outside the approved tags and a changed exclusion rule are flagged.

The embedded stores, the fraud world; the configuration is a copy of the fraud example with an
``integrity`` block on the v6 definition and ``approved_refs`` on the transactions source.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from dsv_platform.core.errors import PublicationError
from dsv_platform.core.ingest.batch import batch_of
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.services.publication.realization import build_realization
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World

INTEGRITY = (
    "integrity: {blocking: [label_change_concentration], label_column: is_fraud, contributor_column: _batch,"
    " max_label_change_share_bp: 5000, min_label_changes: 3, max_contributor_share_bp: 9000}\n"
)
LATER = dt.datetime(2026, 6, 20, 12, tzinfo=dt.UTC)


def _world(tmp_path: Path) -> World:
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    v6 = config / "datasets" / "fraud_training_set_v6.yaml"
    v6.write_text(v6.read_text().replace("rows_at_least: 100", "rows_at_least: 50") + INTEGRITY)
    v5 = config / "datasets" / "fraud_training_set_v5.yaml"
    v5.write_text(v5.read_text().replace("rows_at_least: 100", "rows_at_least: 50"))
    with (config / "sources" / "transactions.yaml").open("a") as f:
        f.write("approved_refs: [reviewed-2026-06]\n")
    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    return World.create(settings=settings, rows_per_day=40, days=4)


def _chargebacks_for(world: World, day: dt.date, count: int) -> pa.Table:
    """Confirmed chargebacks for the first ``count`` transactions of ``day``: their labels flip to fraud."""
    tx = world.domain.transactions(day).slice(0, count)
    charged = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(12), dt.UTC)
    return pa.table(
        {
            "chargeback_id": pa.array([f"cb_flip_{i}" for i in tx.column("transaction_id").to_pylist()], pa.string()),
            "transaction_id": tx.column("transaction_id"),
            "account_id": tx.column("account_id"),
            "amount": tx.column("amount"),
            "reason_code": pa.array(["fraud_card_absent"] * count, pa.string()),
            "status": pa.array(["confirmed"] * count, pa.string()),
            "charged_back_at": pa.array([charged] * count, pa.timestamp("us", tz="UTC")),
            "reported_date": pa.array([day + dt.timedelta(days=2)] * count, pa.date32()),
        }
    )


def test_signals_of_real_builds(tmp_path: Path) -> None:
    world = _world(tmp_path)
    p = world.platform
    transactions = p.config.sources["transactions"]
    first_snapshot = min(world.tables.snapshots(transactions), key=lambda s: s.timestamp_ms).snapshot_id
    assert first_snapshot != world.tables.current_snapshot_id(transactions)
    world.tables.pin(transactions, "reviewed-2026-06", snapshot_id=first_snapshot)  # reviewed: only the first day's load
    v5 = build_realization(p, p.config.dataset("fraud_training_set", "v5"))
    v6 = p.config.dataset("fraud_training_set", "v6")
    first = build_realization(p, v6)
    gates = {g.name: g for g in first.gates if g.name.startswith("integrity:")}
    assert not gates["integrity:unapproved_snapshot"].passed and "transactions@" in str(gates["integrity:unapproved_snapshot"].detail["outside"])
    assert not gates["integrity:exclusion_rules_changed"].passed
    assert gates["integrity:exclusion_rules_changed"].detail["previous"] == v5.ref
    assert gates["integrity:exclusion_rules_changed"].detail["label.before"] == "fraud:v5"
    assert gates["integrity:contributor_share"].passed and gates["integrity:contributor_share"].detail["by"] == "_batch"
    assert gates["integrity:label_change_concentration"].detail["evaluated"] is False  # no baseline yet
    assert all(not g.blocking for n, g in gates.items() if n != "integrity:label_change_concentration")

    day = world.domain.days(4)[1]
    world.ingest([batch_of(_chargebacks_for(world, day, 5), source="chargebacks", day=day + dt.timedelta(days=2), batch_id="flips", recorded_at=LATER)])
    with pytest.raises(PublicationError, match="integrity:label_change_concentration"):
        build_realization(p, v6)
    failed = [r for r in world.registry.versions("fraud_training_set", include_candidates=True) if r.state is RealizationState.FAILED]
    assert len(failed) == 1 and failed[0].version == "v6"
