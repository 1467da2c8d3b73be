"""Registry behaviour suite, run against SQLite (a file) and PostgreSQL (a fresh database per test)."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from dsv_platform.adapters.registry import migrations, schema
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry.engine import create_registry_engine
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import (
    AccessDeniedError,
    AliasConflictError,
    ConfigurationError,
    ExpiredError,
    FailureKind,
    IllegalTransitionError,
    NotFoundError,
    PublicationError,
    QuarantinedError,
    RedactedError,
)
from dsv_platform.core.publication.manifest import BuiltPart, Manifest, ManifestError, build_manifest
from dsv_platform.core.publication.records import DefinitionConflictError, PublishResult, StaleAliasError
from dsv_platform.core.publication.states import TRANSITIONS, ConcurrentTransitionError, RealizationState

S = RealizationState
NAME, VERSION = "fraud_training_set", "v6"
_counter = itertools.count()


def h(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def make_manifest(tag: str, *, dataset: str = NAME, version: str = VERSION) -> Manifest:
    return build_manifest([BuiltPart("all", h(f"rows {tag}"), 3, h(f"obj {tag}"), 64, h("schema"))], dataset=dataset, version=version)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def registry_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('registry') / 'registry.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def registry(registry_url: str) -> Iterator[Registry]:
    reg = Registry.from_url(registry_url)
    reg.register_definition(NAME, VERSION, contract={"name": NAME}, recipe={"sources": ["raw.events"]}, owner="data-platform")
    yield reg
    reg.close()


def sealed(reg: Registry, tag: str | None = None, *, logical_key: str | None = None, version: str = VERSION) -> tuple[int, Manifest]:
    tag = tag or f"m{next(_counter)}"
    rid = reg.create_candidate(NAME, version, f"create-{tag}-{next(_counter)}", logical_key or f"lk-{tag}", "builder")
    manifest = make_manifest(tag, version=version)
    reg.seal(rid, manifest)
    return rid, manifest


def published(reg: Registry, tag: str | None = None, **kw: str) -> tuple[int, Manifest]:
    rid, manifest = sealed(reg, tag, **kw)
    outcome = reg.publish(rid, f"publish-{rid}")
    assert outcome.created and outcome.realization.id == rid
    return rid, manifest


# Paths that drive a fresh realization into each state through the public API.
def reach(reg: Registry, state: RealizationState) -> int:
    if state is S.STAGING:
        return reg.create_candidate(NAME, VERSION, f"create-{next(_counter)}", f"lk-{next(_counter)}", "builder")
    if state is S.SEALED:
        return sealed(reg)[0]
    if state in (S.FAILED, S.ABANDONED):
        rid = reach(reg, S.STAGING)
        reg.transition(rid, state, "test", "tester")
        return rid
    rid = published(reg)[0]
    if state is not S.PUBLISHED:
        reg.transition(rid, state, "test", "tester")
    return rid


# ---------------------------------------------------------------- transitions and events


def test_registry_every_legal_transition(registry: Registry) -> None:
    for old, targets in TRANSITIONS.items():
        for new in targets:
            rid = reach(registry, old)
            before = len(registry.events(rid))
            if (old, new) == (S.SEALED, S.PUBLISHED):
                after = registry.publish(rid, f"legal-{rid}").realization
            else:
                after = registry.transition(rid, new, f"{old.value}->{new.value}", "tester")
            assert after.state is new, (old, new)
            events = registry.events(rid)
            assert len(events) == before + 1
            assert (events[-1].from_state, events[-1].to_state) == (old, new)


def test_registry_every_illegal_transition_is_refused(registry: Registry) -> None:
    for old in S:
        rid = reach(registry, old)
        for new in S:
            if new in TRANSITIONS[old]:
                continue
            with pytest.raises(IllegalTransitionError, match=f"{old.value} -> {new.value}"):
                registry.transition(rid, new, "illegal", "tester")
        assert registry.get(rid).state is old


def test_registry_first_publication_only_through_publish(registry: Registry) -> None:
    rid = reach(registry, S.SEALED)
    with pytest.raises(IllegalTransitionError, match="use publish"):
        registry.transition(rid, S.PUBLISHED, "shortcut", "tester")
    quarantined = reach(registry, S.SEALED)
    registry.transition(quarantined, S.QUARANTINED, "review", "tester")
    with pytest.raises(IllegalTransitionError, match="use publish"):
        registry.transition(quarantined, S.PUBLISHED, "release", "tester")
    outcome = registry.publish(quarantined, "release-after-review")
    assert outcome.created and outcome.realization.state is S.PUBLISHED


def test_registry_stale_state_guard_raises(registry: Registry) -> None:
    rid = reach(registry, S.STAGING)
    stale = registry.get(rid)
    registry.transition(rid, S.FAILED, "crashed", "tester")
    with registry.engine.connect() as conn, conn.begin(), pytest.raises(ConcurrentTransitionError, match="changed concurrently"):
        q.set_state(conn, stale, S.ABANDONED, reason="late", actor="tester", at=datetime.now(UTC))
    assert registry.get(rid).state is S.FAILED
    assert [e.to_state for e in registry.events(rid)] == [S.STAGING, S.FAILED]


def test_registry_events_are_append_only(registry: Registry) -> None:
    rid = reach(registry, S.ELIGIBLE)
    events = registry.events(rid)
    assert [e.to_state for e in events] == [S.STAGING, S.SEALED, S.PUBLISHED, S.ELIGIBLE]
    for prev, nxt in itertools.pairwise(events):
        assert nxt.from_state == prev.to_state and nxt.at >= prev.at and nxt.at.tzinfo is not None
    for statement in ("UPDATE realization_events SET reason = 'rewritten'", "DELETE FROM realization_events"):
        with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
            conn.execute(text(statement))
    assert registry.events(rid) == events


# ---------------------------------------------------------------- candidates and publication


def test_registry_create_candidate_is_idempotent_per_request_id(registry: Registry) -> None:
    first = registry.create_candidate(NAME, VERSION, "req-1", "lk", "builder")
    assert registry.create_candidate(NAME, VERSION, "req-1", "lk", "builder") == first
    assert registry.get(first).state is S.STAGING
    assert len(registry.events(first)) == 1
    with pytest.raises(PublicationError, match="req-1"):
        registry.create_candidate(NAME, VERSION, "req-1", "another-logical-key", "builder")
    with pytest.raises(NotFoundError):
        registry.create_candidate(NAME, "v99", "req-2", "lk", "builder")


def test_registry_seal_records_hashes_and_stores_canonical_manifest(registry: Registry) -> None:
    rid, manifest = sealed(registry, "seal")
    record = registry.get(rid)
    assert (record.state, record.manifest_hash, record.content_hash, record.schema_hash) == (
        S.SEALED, manifest.manifest_hash, manifest.content_hash, manifest.schema_hash,
    )  # fmt: skip
    stored = registry.get_manifest(manifest.manifest_hash)
    assert hashlib.sha256(stored.encode()).hexdigest() == manifest.manifest_hash
    assert registry.seal(rid, manifest.to_document()).state is S.SEALED  # same manifest again: no-op
    with pytest.raises(IllegalTransitionError, match="already sealed"):
        registry.seal(rid, make_manifest("other"))
    with pytest.raises(NotFoundError):
        registry.get_manifest(h("missing"))


def test_registry_seal_refuses_foreign_or_non_canonical_manifests(registry: Registry) -> None:
    rid = reach(registry, S.STAGING)
    with pytest.raises(PublicationError, match="is for other:v6"):
        registry.seal(rid, make_manifest("x", dataset="other"))
    doc = make_manifest("x").to_document()
    doc["rows"] = 4
    with pytest.raises(ManifestError):
        registry.seal(rid, doc)
    assert registry.get(rid).state is S.STAGING


def test_registry_publish_is_idempotent_by_request_id(registry: Registry) -> None:
    rid, _ = sealed(registry)
    first = registry.publish(rid, "pub-1")
    again = registry.publish(rid, "pub-1")
    assert (first.created, first.result) == (True, PublishResult.CREATED)
    assert (again.created, again.result) == (False, PublishResult.REPLAYED)
    assert again.realization == first.realization
    assert registry.find_by_request_id("pub-1") == first.realization
    assert registry.publish(rid, "pub-2").result is PublishResult.REPLAYED
    other, _ = sealed(registry)
    with pytest.raises(PublicationError, match="pub-1"):
        registry.publish(other, "pub-1")
    assert [e.to_state for e in registry.events(rid)].count(S.PUBLISHED) == 1


def test_registry_publish_same_manifest_twice_gives_one_version(registry: Registry) -> None:
    a, manifest = sealed(registry, "same", logical_key="day-1")
    b, _ = sealed(registry, "same", logical_key="day-1")
    first, second = registry.publish(a, "pa"), registry.publish(b, "pb")
    assert first.created and not second.created
    assert second.result is PublishResult.SAME_MANIFEST and second.realization.id == a
    assert registry.get(b).state is S.ABANDONED
    assert [r.id for r in registry.versions(NAME)] == [a]
    assert registry.find_by_manifest_hash(manifest.manifest_hash).id == a  # type: ignore[union-attr]
    assert registry.publish(b, "pb").realization.id == a  # the loser's retry gets the same answer


def test_registry_publish_loser_of_logical_key_is_abandoned(registry: Registry) -> None:
    a, ma = sealed(registry, "winner", logical_key="2026-06-24")
    b, mb = sealed(registry, "loser", logical_key="2026-06-24")
    assert registry.publish(a, "pa").created
    lost = registry.publish(b, "pb")
    assert (lost.created, lost.result, lost.realization.id, lost.candidate_id) == (False, PublishResult.LOST_RACE, a, b)
    assert lost.realization.manifest_hash == ma.manifest_hash != mb.manifest_hash
    assert registry.get(b).state is S.ABANDONED
    with pytest.raises(NotFoundError):
        registry.resolve(NAME, VERSION, mb.manifest_hash)


def test_registry_publish_requires_a_sealed_candidate(registry: Registry) -> None:
    rid = reach(registry, S.STAGING)
    with pytest.raises(IllegalTransitionError, match="seal it"):
        registry.publish(rid, "too-early")
    failed, _ = sealed(registry)
    registry.transition(failed, S.FAILED, "gate failed", "tester")
    with pytest.raises(IllegalTransitionError, match="FAILED"):
        registry.publish(failed, "after-failure")


def test_registry_human_version_is_date_and_daily_sequence(registry_url: str) -> None:
    now = [datetime(2026, 6, 24, 23, 59, tzinfo=UTC)]
    reg = Registry.from_url(registry_url, clock=lambda: now[0])
    reg.register_definition(NAME, VERSION, contract={}, recipe={}, owner="o")
    humans = []
    for _ in range(3):
        humans.append(published(reg)[0])
    now[0] += timedelta(minutes=2)
    humans.append(published(reg)[0])
    assert [reg.get(r).human_version for r in humans] == ["2026-06-24.1", "2026-06-24.2", "2026-06-24.3", "2026-06-25.1"]
    assert [r.id for r in reg.versions(NAME)] == list(reversed(humans))
    reg.close()


def test_registry_definitions_are_immutable(registry: Registry) -> None:
    same = registry.register_definition(NAME, VERSION, contract={"name": NAME}, recipe={"sources": ["raw.events"]}, owner="data-platform")
    assert same.contract_hash == h('{"name":"fraud_training_set"}')
    with pytest.raises(DefinitionConflictError, match="new definition version"):
        registry.register_definition(NAME, VERSION, contract={"name": NAME, "x": 1}, recipe={}, owner="o")


# ---------------------------------------------------------------- resolution


def test_registry_resolve_latest_readable_and_pinned(registry: Registry) -> None:
    old, m_old = published(registry)
    new, m_new = published(registry)
    assert registry.resolve(NAME, VERSION).id == new
    assert registry.resolve(NAME, VERSION, m_old.manifest_hash).id == old
    assert registry.resolve_ref(f"{NAME}:{VERSION}@sha256:{m_new.manifest_hash}").id == new
    registry.transition(new, S.QUARANTINED, "suspect", "tester")
    assert registry.resolve(NAME, VERSION).id == old  # newest *readable* publication
    registry.transition(old, S.EXPIRED, "retention", "tester")
    with pytest.raises(QuarantinedError) as info:  # none readable: the newest one's failure
        registry.resolve(NAME, VERSION)
    assert info.value.detail["state"] == "QUARANTINED" and info.value.kind is FailureKind.QUARANTINED and info.value.exit_code == 14


def test_registry_resolve_not_found_never_falls_through(registry: Registry) -> None:
    with pytest.raises(NotFoundError, match="no published realization"):
        registry.resolve(NAME, VERSION)
    _rid, manifest = published(registry)
    registry.register_definition(NAME, "v7", contract={}, recipe={}, owner="o")
    cases = [
        (NAME + "_x", VERSION, None, None),
        (NAME, "v7", None, None),
        (NAME, "v5", None, None),
        (NAME, "v7", manifest.manifest_hash, None),
        (NAME, VERSION, h("nope"), None),
        (NAME, VERSION, None, "production"),
    ]
    for name, version, digest, alias in cases:
        with pytest.raises(NotFoundError) as info:
            registry.resolve(name, version, digest, alias)
        assert info.value.exit_code == 3
    _unpublished, m_unpublished = sealed(registry)
    with pytest.raises(NotFoundError):
        registry.resolve(NAME, VERSION, m_unpublished.manifest_hash)


def test_registry_resolve_redacted_and_expired(registry: Registry) -> None:
    redacted, m_red = published(registry)
    generation = registry.raise_redaction_generation(h("subject-1"), reason="erasure request", actor="dpo")
    assert generation == 1 and registry.raise_redaction_generation(h("subject-2"), reason="r", actor="dpo") == 2
    registry.transition(redacted, S.REDACTED, "subject erased", "dpo", redaction_generation=generation)
    with pytest.raises(RedactedError) as info:
        registry.resolve(NAME, VERSION, m_red.manifest_hash)
    assert info.value.detail["redaction_generation"] == 1 and info.value.exit_code == 4
    expired, m_exp = published(registry)
    registry.transition(expired, S.EXPIRED, "retention", "gc")
    with pytest.raises(ExpiredError):
        registry.resolve(NAME, VERSION, m_exp.manifest_hash)
    with pytest.raises(ExpiredError):
        registry.resolve(NAME, VERSION)


def test_registry_resolve_access_control(registry: Registry) -> None:
    rid, manifest = published(registry)
    registry.set_allowed_readers(NAME, VERSION, ["alice"])
    assert registry.resolve(NAME, VERSION, actor="alice").id == rid
    for actor in ("mallory", None):
        with pytest.raises(AccessDeniedError):
            registry.resolve(NAME, VERSION, manifest.manifest_hash, actor=actor)
    registry.set_allowed_readers(NAME, VERSION, [])
    assert registry.resolve(NAME, VERSION, actor="mallory").id == rid


# ---------------------------------------------------------------- aliases


def test_registry_alias_compare_and_swap(registry: Registry) -> None:
    a, ma = published(registry)
    b, mb = published(registry)
    for rid in (a, b):
        registry.approve(rid, reason="reviewed", actor="ops")  # production is protected: it points only at ELIGIBLE realizations
    first = registry.set_alias(NAME, VERSION, "production", ma.manifest_hash, expect=None, actor="ops")
    assert (first.target, first.generation) == (ma.manifest_hash, 1)
    with pytest.raises(StaleAliasError) as info:
        registry.set_alias(NAME, VERSION, "production", mb.manifest_hash, expect=None, actor="ops")
    assert info.value.actual == ma.manifest_hash and ma.manifest_hash in str(info.value)
    moved = registry.set_alias(NAME, VERSION, "production", mb.manifest_hash, expect=ma.manifest_hash, actor="ops")
    assert (moved.target, moved.generation) == (mb.manifest_hash, 2)
    with pytest.raises(AliasConflictError, match=mb.manifest_hash):
        registry.set_alias(NAME, VERSION, "production", ma.manifest_hash, expect=ma.manifest_hash, actor="late")
    with pytest.raises(StaleAliasError) as missing:
        registry.set_alias(NAME, VERSION, "candidate", ma.manifest_hash, expect=mb.manifest_hash, actor="ops")
    assert missing.value.actual is None
    assert registry.resolve(NAME, VERSION, alias="production").id == b
    assert registry.resolve_ref(f"{NAME}:{VERSION}@production").id == b
    with pytest.raises(NotFoundError):
        registry.resolve(NAME, VERSION, ma.manifest_hash, alias="production")
    history = registry.alias_history(NAME, VERSION, "production")
    assert [(m.old_target, m.new_target, m.generation) for m in history] == [
        (None, ma.manifest_hash, 1), (ma.manifest_hash, mb.manifest_hash, 2),
    ]  # fmt: skip


def test_registry_alias_only_to_published_targets(registry: Registry) -> None:
    _rid, manifest = sealed(registry)
    with pytest.raises(NotFoundError):
        registry.set_alias(NAME, VERSION, "candidate", manifest.manifest_hash, expect=None, actor="ops")
    q_rid, q_manifest = published(registry)
    registry.transition(q_rid, S.QUARANTINED, "review", "ops")
    with pytest.raises(QuarantinedError, match=r"alias fraud_training_set:v6@candidate cannot move .* it is quarantined"):  # exit 14
        registry.set_alias(NAME, VERSION, "candidate", q_manifest.manifest_hash, expect=None, actor="ops")
    e_rid, e_manifest = published(registry)
    registry.transition(e_rid, S.ELIGIBLE, "approved", "ops")
    assert registry.set_alias(NAME, VERSION, "latest-approved", e_manifest.manifest_hash, expect=None, actor="ops").generation == 1
    assert registry.get_alias(NAME, VERSION, "candidate") is None
    with pytest.raises(DBAPIError, match="append-only"), registry.engine.begin() as conn:
        conn.execute(text("DELETE FROM alias_history"))


# ---------------------------------------------------------------- lineage and consumption


def test_registry_records_lineage_and_consumption(registry: Registry) -> None:
    rid, manifest = published(registry)
    edges = [("quality_report", h("qr"), "realization", manifest.manifest_hash, "reports_on", {"passed": True})]
    assert registry.record_lineage(edges, actor="builder") == 1
    registry.record_consumption(f"{NAME}:{VERSION}", actor="trainer", realization=registry.get(rid), failure=None)
    registry.record_consumption(f"{NAME}:v9", actor="trainer", realization=None, failure="NOT_FOUND")
    with registry.engine.connect() as conn:
        edge = conn.execute(schema.lineage_edges.select()).one()
        reads = conn.execute(schema.consumption_records.select().order_by(schema.consumption_records.c.id)).all()
    assert (edge.src_kind, edge.dst_id, edge.attributes_json) == ("quality_report", manifest.manifest_hash, '{"passed":true,"recorded_by":"builder"}')
    assert [(r.ok, r.failure_kind, r.realization_id) for r in reads] == [(True, None, rid), (False, "NOT_FOUND", None)]


# ---------------------------------------------------------------- migrations


def test_registry_migrations_upgrade_an_old_database_in_place(registry_url: str) -> None:
    engine = create_registry_engine(registry_url)
    assert migrations.current_version(engine) == 0
    assert migrations.upgrade(engine, target=1) == [1]
    now = datetime(2026, 1, 2, tzinfo=UTC)
    with engine.begin() as conn:  # a v1-era row, written with v1's columns only
        conn.execute(
            text(
                "INSERT INTO dataset_definitions (name, version, contract_json, contract_hash, recipe_json, recipe_hash, owner, created_at) "
                "VALUES ('old_set', 'v1', '{}', :h, '{}', :h, 'o', :at)"
            ),
            {"h": h("{}"), "at": now.replace(tzinfo=None)},
        )
    assert "allowed_readers_json" not in {c["name"] for c in inspect(engine).get_columns("dataset_definitions")}
    assert migrations.upgrade(engine) == [m.version for m in migrations.MIGRATIONS if m.version >= 2]  # numbers are reserved per issue: gaps allowed
    assert migrations.upgrade(engine) == []
    assert migrations.current_version(engine) == migrations.LATEST
    insp = inspect(engine)
    for table in schema.metadata.sorted_tables:
        assert {c["name"] for c in insp.get_columns(table.name)} == set(table.columns.keys()), table.name
    engine.dispose()
    reg = Registry.from_url(registry_url)
    old = reg.get_definition("old_set", "v1")
    assert old is not None and old.allowed_readers == () and old.created_at == now
    rid = reg.create_candidate("old_set", "v1", "r", "lk", "b")
    reg.seal(rid, make_manifest("old", dataset="old_set", version="v1"))
    assert reg.publish(rid, "p").created
    reg.close()


def test_a_fresh_registry_is_migrated_whole_or_not_at_all(registry_url: str) -> None:
    """An empty database takes every migration in one transaction: one failing half way (v12's table is already
    there, made by hand) leaves it as it was, not at v11; removing the cause, it upgrades whole."""
    engine = create_registry_engine(registry_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE gc_deletions (stray INTEGER)"))
    with pytest.raises(DBAPIError):
        migrations.upgrade(engine)
    assert migrations.current_version(engine) == 0
    assert set(inspect(engine).get_table_names()) == {"gc_deletions"}
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE gc_deletions"))
    assert migrations.upgrade(engine) == [m.version for m in migrations.MIGRATIONS]
    assert migrations.current_version(engine) == migrations.LATEST
    engine.dispose()


def test_registry_refuses_a_newer_schema(registry_url: str) -> None:
    engine = create_registry_engine(registry_url)
    migrations.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(schema.schema_version.insert().values(version=99, description="future", applied_at=datetime.now(UTC)))
    engine.dispose()
    with pytest.raises(ConfigurationError, match="newer than this code"):
        Registry.from_url(registry_url)
