"""Issue 16 part 4: operator quarantine and the two-person release, every refusal, GC and canonical loading.

On the embedded home (the bootstrap ``admin`` holds every role; other identities get explicit grants):
a quarantine needs ``operator``; a quarantined realization is refused to readers, to alias moves (exit
14 QUARANTINED, naming alias and quarantine) and to approval (exit 15); a step the quarantine's state does not
allow is exit 19 (QUARANTINE_STATE); a release requested by one identity is
approved only by another holding operator or approver; GC at a zero safety window keeps its objects;
a quarantined raw batch is never loaded.
"""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from pathlib import Path

import pytest

from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.gc import GcPolicy
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.publication.quarantine import quarantine, release
from dsv_platform.services.retention import gc
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result
from dsv_platform_tests.scenarios.support import World

ZERO = GcPolicy(safety_window=timedelta(0))


@pytest.fixture
def dsv(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> DsvCli:
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home")})


def refused(result: Result, code: int, *names: str) -> None:
    assert result.code == code, result
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    for name in names:
        assert name in result.err, (name, result.err)


def ok(result: Result) -> str:
    assert result.code == 0, result
    return result.out


def test_every_quarantine_refusal_and_the_two_person_release(dsv, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    built = world.build("v6")
    mh = built.manifest_hash
    world.platform.close()
    ok(dsv("identity", "create", "reader"))
    assert ok(dsv("quarantine", "--list")) == "no quarantines in force (--all: released ones too)\n"
    refused(dsv("quarantine", built.ref, "--reason", "suspicious", identity="reader"), 7, "'reader'", "'operator'")
    refused(dsv("release", built.ref, "--reason", "nothing to release"), 3, "not quarantined")
    refused(dsv("quarantine", "raw:transactions/no-such-batch", "--reason", "x"), 3, "no landed raw batch raw:transactions/no-such-batch")
    refused(dsv("quarantine", "raw:transactions", "--reason", "x"), 2, "raw:<source>/<batch id>")
    out = ok(dsv("quarantine", built.ref, "--reason", "label flips reported by the fraud team"))
    assert f"quarantine #1 of {built.ref}" in out and f"realization:{mh}" in out and "QUARANTINED" in out

    refused(dsv("quarantine", built.ref, "--reason", "again"), 19, "already quarantined (#1 by admin")
    refused(dsv("resolve", built.ref), 14, "QUARANTINED", built.ref)
    refused(dsv("alias", "set", "fraud_training_set:v6@candidate", mh, "--expect", mh), 14, "alias fraud_training_set:v6@candidate", "quarantine #1")
    refused(dsv("approve", built.ref, "--reason", "fine", identity="reader"), 7, "'reader'", "'approver'")
    ok(dsv("grants", "add", "reader", "approver", "--reason", "second pair of eyes"))
    refused(dsv("approve", built.ref, "--reason", "fine", identity="reader"), 15, "QUARANTINED")
    refused(dsv("release", built.ref, "--approve", "--reason", "too early"), 19, "request a release first")
    assert "QUARANTINED" in ok(dsv("status"))

    refused(dsv("release", built.ref, "--reason", "not mine to ask", identity="reader"), 7, "'reader'", "'operator'")
    assert "requested" in ok(dsv("release", built.ref, "--reason", "the flips were a reporting error"))
    refused(dsv("release", built.ref, "--reason", "again"), 19, "RELEASE_PENDING")
    refused(dsv("release", built.ref, "--approve", "--reason", "me too"), 7, "'admin' requested the release", "second identity")
    assert built.ref in ok(dsv("release", built.ref, "--approve", "--reason", "evidence reviewed", identity="reader"))
    assert mh in ok(dsv("resolve", built.ref))
    refused(dsv("release", built.ref, "--approve", "--reason", "twice"), 3, "not quarantined")
    listed = ok(dsv("quarantine", "--list", "--all"))
    assert "(RELEASED) by admin" in listed


def test_gc_at_a_zero_window_keeps_a_quarantined_realization(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(2)[1]
    suspect = world.build("v6")
    quarantine(world.platform, suspect.ref, reason="under review")
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    newer = world.build("v6")  # the head and the candidate alias move on: only the quarantine keeps the suspect
    assert newer.manifest_hash != suspect.manifest_hash
    store = world.platform.store
    plan = gc.plan(world.registry, store, tables=world.tables, landing=world.zone, policy=ZERO)
    gc.apply_plan(plan, registry=world.registry, store=store, tables=world.tables, dry_run=False, actor="test")
    kept = [o for o in (p.object for p in suspect.manifest.partitions) if store.exists(o)]
    assert kept == [p.object for p in suspect.manifest.partitions]
    release(world.platform, suspect.ref, reason="cleared")
    other = _as(world, "op-two")
    release(other, suspect.ref, reason="cleared, second pair of eyes", approve=True)
    assert world.registry.find_by_manifest_hash(suspect.manifest_hash).state is RealizationState.PUBLISHED  # type: ignore[union-attr]
    for part in suspect.manifest.partitions:  # every partition object survived and still hashes to its name
        assert store.get(part.object)


def _as(world: World, name: str):  # type: ignore[no-untyped-def]
    """A platform on ``world``'s home acting as ``name``, created with the operator role by the admin."""
    from dataclasses import replace

    from dsv_platform.bootstrap import build_platform
    from dsv_platform.core.trust.trust import Grant, Role
    from dsv_platform.services.trust import trust

    trust.create_identity(world.platform, name, by="admin")
    trust.change_grant(world.platform, Grant(name, Role.OPERATOR), add=True, reason="test")
    return build_platform(replace(world.settings, identity=name, actor=name))


def test_a_quarantined_raw_batch_is_never_loaded(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(2)[1]
    batch = late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)
    records = world.zone.land_all(batch, SOURCES["transactions"])
    record = quarantine(world.platform, f"raw:transactions/{batch.batch_id}", reason="writer not expected")
    assert record.kind == "raw_batch" and record.affected == () and record.evidence["batch_refs"] == [records[0].batch_ref]
    load = load_partition(world.platform, world.platform.config.sources["transactions"], day)
    assert records[0].batch_ref not in {b.record.batch_ref for b in load.batches}
    assert records[0].batch_ref in {r.batch_ref for r in load.quarantined}
    ids = set(world.tables.read(world.platform.config.sources["transactions"], partition=day).column("transaction_id").to_pylist())
    assert not ids & set(batch_ids(batch))
    inventory = gc.collect_inventory(world.registry, world.platform.store, tables=world.tables, landing=world.zone, policy=ZERO)
    assert [r.loadable for r in inventory.raw_batches if r.batch_ref == records[0].batch_ref] == [False]  # kept as a landing root


def test_a_raw_batch_is_named_the_same_way_as_in_lineage(tmp_path: Path) -> None:
    """Issue 23 item 8: ``raw_batch:<batch id>`` (every revision) is accepted here as in ``dsv lineage``."""
    world = World.create(tmp_path / "home", rows_per_day=40, days=3)
    day = world.domain.days(2)[1]
    batch = late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)
    records = world.zone.land_all(batch, SOURCES["transactions"])
    record = quarantine(world.platform, f"raw_batch:{batch.batch_id}", reason="writer not expected")
    assert record.kind == "raw_batch" and record.evidence["batch_refs"] == [records[0].batch_ref]
    with pytest.raises(NotFoundError, match="no landed raw batch raw_batch:no-such-batch"):
        quarantine(world.platform, "raw_batch:no-such-batch", reason="x")


def batch_ids(batch) -> list[int]:  # type: ignore[no-untyped-def]
    import io

    import pyarrow.csv as pcsv

    return pcsv.read_csv(io.BytesIO(batch.data)).column("transaction_id").to_pylist()


def test_a_rebuild_after_a_raw_batch_quarantine_reads_none_of_its_rows(tmp_path: Path) -> None:
    """The poisoned rows were loaded before the quarantine (append-only: they stay in the table); a rebuild leaves them out."""
    import json

    from dsv_platform.services.publication.datasets import open_dataset

    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    day = world.domain.days(2)[1]
    batch = late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)
    world.ingest([batch])  # landed, loaded, labelled
    records = [r for r in world.zone.records() if r.batch_id == batch.batch_id]
    poisoned = set(batch_ids(batch))
    suspect = world.build("v6")
    read = set(open_dataset(world.platform, suspect.ref).to_arrow().column("transaction_id").to_pylist())
    assert poisoned <= read, "the batch was loaded and built before anyone noticed"

    record = quarantine(world.platform, f"raw:transactions/{batch.batch_id}", reason="writer not expected")
    assert ("realization", suspect.manifest.manifest_hash) in {(a.get("kind"), a.get("id")) for a in record.affected}
    assert world.registry.find_by_manifest_hash(suspect.manifest.manifest_hash).state is RealizationState.QUARANTINED  # type: ignore[union-attr]
    clean = world.build("v6")  # the same pinned snapshots: a new logical version because of the quarantine
    assert clean.manifest.manifest_hash != suspect.manifest.manifest_hash and not clean.reused
    ids = set(open_dataset(world.platform, clean.ref).to_arrow().column("transaction_id").to_pylist())
    assert not ids & poisoned and ids == read - poisoned
    assert json.loads(str(clean.manifest.parameters["excluded_batches"])) == [records[0].batch_ref]
    assert world.build("v6").manifest.manifest_hash == clean.manifest.manifest_hash  # idempotent while the quarantine holds
