"""Issue 24 items 3-4 end to end: an insider with write access to the registry database, against training reads.

On the embedded default with the fraud example: two approved realizations of ``fraud_training_set:v6``, ``production``
on the newer. The insider rolls ``production`` back, lifts a quarantine with one UPDATE and swaps the publisher's key
row; ``open_dataset`` (what training reads through) refuses each with UNTRUSTED naming what was changed, and reads
again once the row is put back.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import update

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.quarantine import quarantine
from dsv_platform_tests.scenarios.support import World

PRODUCTION = "fraud_training_set:v6@production"


def _sql(world: World, stmt: object) -> None:
    with world.registry.engine.begin() as conn:
        conn.execute(stmt)  # type: ignore[call-overload]


def _refused(world: World, *names: str) -> None:
    with pytest.raises(UntrustedError) as caught:
        open_dataset(world.platform, PRODUCTION)
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))


def test_an_insider_with_database_access_is_refused_at_every_read(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=4)
    first = world.build("v6")
    day = world.domain.days(2)[1]
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    second = world.build("v6")
    assert first.manifest_hash != second.manifest_hash
    for built in (first, second):
        approve(world.registry, built.ref, reason="reviewed", actor="admin")
    world.registry.set_alias("fraud_training_set", "v6", "production", second.manifest_hash, expect=None, actor="admin", reason="release")
    assert open_dataset(world.platform, PRODUCTION).manifest_hash == second.manifest_hash

    a, r, i = s.aliases, s.realizations, st.identities
    _sql(world, update(a).where(a.c.alias == "production").values(target_manifest_hash=first.manifest_hash))  # roll back
    _refused(world, "alias 'production'", first.manifest_hash, "newest move #")
    _sql(world, update(a).where(a.c.alias == "production").values(target_manifest_hash=second.manifest_hash))

    quarantine(world.platform, second.ref, reason="poisoning suspected")
    _sql(world, update(r).where(r.c.manifest_hash == second.manifest_hash).values(state=RealizationState.ELIGIBLE.value))  # lifted
    _refused(world, "the registry says ELIGIBLE", "says QUARANTINED")
    _sql(world, update(r).where(r.c.manifest_hash == second.manifest_hash).values(state=RealizationState.QUARANTINED.value))

    with world.registry.engine.connect() as conn:
        genuine = conn.execute(i.select().where(i.c.name == "admin")).one().public_key
    _sql(world, update(i).where(i.c.name == "admin").values(public_key="ab" * 32))  # the signer's key row swapped
    with pytest.raises(UntrustedError, match="identity 'admin'"):
        open_dataset(world.platform, f"fraud_training_set:v6@sha256:{first.manifest_hash}")
    _sql(world, update(i).where(i.c.name == "admin").values(public_key=genuine))
    assert open_dataset(world.platform, f"fraud_training_set:v6@sha256:{first.manifest_hash}").manifest_hash == first.manifest_hash
