"""Issue 24, done-when: one insider with write access to the registry database and a Launchpad, against one home.

On the embedded default with the fraud example (two approved realizations of ``fraud_training_set:v6``,
``production`` on the newer, a strict registry), the insider tries in turn: mint an admin from a fresh home, run a
Dagster job as another identity, swap a key row, re-point ``production``, lift a quarantine, roll a realization back
to an older validly signed manifest, re-attribute a build, rewrite and truncate the audit log, and edit a canonical data file. Each is
refused or detected, naming what was changed; the state is put back between attacks, so each is seen on its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy import select, update

from dsv_platform.adapters.iceberg.iceberg_files import live_files
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import main
from dsv_platform.core.errors import AccessDeniedError, DataFileCorruptError, UntrustedError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.services.publication.approval import approve
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.publication.quarantine import quarantine
from dsv_platform.services.publication.realization import RealizationBuild
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.builders import verify_builders
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_audit_seal import rechain
from dsv_platform_tests.services.test_audit_seal import sql as audit_sql
from dsv_platform_tests.services.test_canonical_digests import rewrite_amounts
from dsv_platform_tests.services.test_trust_registry import who_runs

PRODUCTION = "fraud_training_set:v6@production"


def _sql(world: World, stmt: object) -> None:
    with world.registry.engine.begin() as conn:
        conn.execute(stmt)  # type: ignore[call-overload]


def _untrusted(read: Callable[[], object], *names: str) -> None:
    with pytest.raises(UntrustedError) as caught:
        read()
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    w = World.create(tmp_path / "home", rows_per_day=40, days=4)
    monkeypatch.setenv("DSV_HOME", str(w.settings.home))
    monkeypatch.setenv("DSV_REGISTRY_URL", w.settings.registry_url)
    monkeypatch.setenv("DSV_IDENTITY", "admin")  # the strict registry: the CLI acts as a named identity
    trust.current_identity(w.platform)  # admin: bootstraps the registry and signs from here on
    trust.mark_strict(w.platform)
    yield w
    w.platform.close()


def _two_approved(world: World) -> tuple[RealizationBuild, RealizationBuild]:
    first = world.build("v6")
    day = world.domain.days(2)[1]
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=20), count=5)])
    second = world.build("v6")
    for built in (first, second):
        approve(world.registry, built.ref, reason="reviewed", actor="admin")
    world.registry.set_alias("fraud_training_set", "v6", "production", second.manifest_hash, expect=None, actor="admin", reason="release")
    assert open_dataset(world.platform, PRODUCTION).manifest_hash == second.manifest_hash
    return first, second


def _mint_and_launch(world: World, tmp_path: Path) -> None:
    """A fresh home on the strict registry mints nobody; run config cannot choose the identity or the home."""
    intruder = replace(load_settings({}).with_home(tmp_path / "intruder"), registry_url=world.settings.registry_url)
    with build_platform(intruder) as p, pytest.raises(AccessDeniedError, match="strict home needs an identity"):
        trust.current_identity(p)
    with build_platform(replace(intruder, identity="admin")) as p, pytest.raises(AccessDeniedError, match=r"no private key .*cannot act as 'admin'"):
        trust.current_identity(p)
    resource = PlatformResource.for_settings(world.settings)
    with pytest.raises(dg.DagsterInvalidConfigError, match='unexpected config entry "identity"'):
        dg.materialize([who_runs], resources={"platform": resource}, run_config={"resources": {"platform": {"config": {"identity": "admin"}}}})
    assert [i.name for i in trust.records(world.platform).identities()] == ["admin"]


def _registry_rows(world: World, first: RealizationBuild, second: RealizationBuild) -> None:
    """Key row, alias, manifest rollback, builder and quarantine, each straight in the database, each refused at read (or audit --verify)."""
    a, r, i = s.aliases, s.realizations, st.identities
    with world.registry.engine.connect() as conn:
        genuine = conn.execute(i.select().where(i.c.name == "admin")).one().public_key
    _sql(world, update(i).where(i.c.name == "admin").values(public_key="ab" * 32))
    _untrusted(lambda: open_dataset(world.platform, PRODUCTION), "identity 'admin'")
    _sql(world, update(i).where(i.c.name == "admin").values(public_key=genuine))

    _sql(world, update(a).where(a.c.alias == "production").values(target_manifest_hash=first.manifest_hash))
    _untrusted(lambda: open_dataset(world.platform, PRODUCTION), "alias 'production'", first.manifest_hash)
    _sql(world, update(a).where(a.c.alias == "production").values(target_manifest_hash=second.manifest_hash))

    with world.registry.engine.connect() as conn:
        second_id = conn.execute(r.select().where(r.c.manifest_hash == second.manifest_hash)).one().id
    _sql(world, update(r).where(r.c.id == second_id).values(manifest_hash=first.manifest_hash))  # the newest row, an older signed manifest
    _untrusted(lambda: open_dataset(world.platform, "fraud_training_set:v6"), "state event #", "the row it moved was changed")
    _sql(world, update(r).where(r.c.id == second_id).values(manifest_hash=second.manifest_hash))
    assert open_dataset(world.platform, PRODUCTION).manifest_hash == second.manifest_hash

    b = st.realization_builders  # the builder re-attributed (so its builder could approve it): the signed statement names the real one
    first_id = world.registry.resolve_ref(first.ref).id
    with world.registry.engine.connect() as conn:
        builder = conn.execute(select(b.c.identity).where(b.c.realization_id == first_id)).scalar_one()
    _sql(world, update(b).where(b.c.realization_id == first_id).values(identity="someone-else"))
    _untrusted(lambda: verify_builders(world.platform), first.ref, "builder row names 'someone-else'", "realization_builders.identity")
    _sql(world, update(b).where(b.c.realization_id == first_id).values(identity=builder))

    quarantine(world.platform, second.ref, reason="poisoning suspected")
    _sql(world, update(r).where(r.c.id == second_id).values(state=RealizationState.ELIGIBLE.value))
    _untrusted(lambda: open_dataset(world.platform, PRODUCTION), "the registry says ELIGIBLE", "says QUARANTINED")
    _sql(world, update(r).where(r.c.id == second_id).values(state=RealizationState.QUARANTINED.value))


def _audit(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A re-attributed, re-chained entry and a tail cut with its checkpoints: ``dsv audit --verify`` exits 13 naming them."""
    url = world.settings.registry_url
    exported = tmp_path / "audit-export.json"
    assert main(["audit", "--export", str(exported)]) == 0
    entries = trust.records(world.platform).audit_entries()
    victim = next(e for e in entries if e["action"] == "quarantine")
    victim.update(identity="bootstrap", reason="nothing happened")
    rechain(url, entries)
    capsys.readouterr()
    assert main(["audit", "--verify"]) == 13
    assert f"audit entry {victim['seq']}" in capsys.readouterr().err
    cut = int(entries[len(entries) // 2]["seq"])
    audit_sql(url, *(f"DELETE FROM {table} WHERE seq >= {cut}" for table in ("audit_signatures", "audit_checkpoints", "audit_log")))
    rechain(url, trust.records(world.platform).audit_entries())
    assert main(["audit", "--verify", "--against", str(exported), "--json"]) == 13
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "UNTRUSTED" in out.err and "entries were cut off or deleted" in out.err, out


def _canonical_file(world: World, first: RealizationBuild, capsys: pytest.CaptureFixture[str]) -> None:
    """A canonical data file rewritten in the warehouse: the next build and ``dsv verify`` of a pin name it, CORRUPT."""
    victim = live_files(world.platform.tables.load("transactions"), None)[0].path
    rewrite_amounts(victim)
    with pytest.raises(DataFileCorruptError) as caught:
        world.build("v6")
    assert victim in str(caught.value) and caught.value.exit_code == 6
    capsys.readouterr()
    assert main(["verify", first.ref, "--json"]) == 6
    assert victim in capsys.readouterr().err


def test_every_attack_of_an_insider_is_refused_or_detected_naming_what_changed(world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = _two_approved(world)
    _mint_and_launch(world, tmp_path)
    _registry_rows(world, first, second)
    _canonical_file(world, first, capsys)
    _audit(world, tmp_path, capsys)
