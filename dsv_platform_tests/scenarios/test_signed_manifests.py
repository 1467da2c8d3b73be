"""Issue 16 part 2: the publisher signs each realization; training refuses a forged manifest, a non-publisher's
signature and a tampered envelope with UNTRUSTED (exit 13), from the service, the CLI and after a DB-level forgery."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import schema as s
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.publication.manifest import Manifest, content_hash_of
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.reproduction.reproduction import Outcome
from dsv_platform.core.trust import dsse
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.services.publication.datasets import load_manifest, open_dataset
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform.services.reproduction.reproduce import reproduce
from dsv_platform.services.trust import signing, trust
from dsv_platform_tests.scenarios.support import World

DSV = str(Path(sys.executable).with_name("dsv"))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World.create(tmp_path_factory.mktemp("signed"), days=3)


@pytest.fixture(scope="module")
def published(world: World) -> Realization:
    return world.registry.resolve_ref(world.build().ref)


def forge(world: World, genuine: Realization, tag: str, *, drop: tuple[int, ...] = (0,)) -> Manifest:
    """What an attacker with database access does: an altered manifest (a partition removed, re-hashed) and a registry row naming it."""
    manifest = load_manifest(world.registry, genuine)
    kept = tuple(p for i, p in enumerate(manifest.partitions) if i not in drop)
    assert kept, "the world has too few partitions to forge this way"
    altered = dataclasses.replace(manifest, partitions=kept, rows=sum(p.rows for p in kept), content_hash=content_hash_of((p.key, p.hash) for p in kept))
    now = dt.datetime.now(dt.UTC)
    row = {"dataset": genuine.dataset, "version": genuine.version, "logical_key": f"forged-{tag}", "manifest_hash": altered.manifest_hash}
    with world.registry.engine.begin() as conn:
        conn.execute(
            insert(s.manifests).values(
                canonical_json=altered.canonical_bytes().decode(), stored_at=now, **{k: row[k] for k in ("dataset", "version", "manifest_hash")}
            )
        )
        rid = conn.execute(
            insert(s.realizations).values(
                state=RealizationState.PUBLISHED.value, request_id=f"forged-{tag}", content_hash=altered.content_hash, schema_hash=altered.schema_hash,
                human_version=f"forged.{tag}", created_at=now, created_by="mallory", state_changed_at=now, published_at=now, **row,
            )
        ).inserted_primary_key[0]  # fmt: skip
        conn.execute(insert(s.publication_claims).values(realization_id=rid, human_version=f"forged.{tag}", request_id=f"forged-{tag}", claimed_at=now, **row))
        # The row's state event, signed by the platform's own identity: what refuses here is the manifest's signature
        # (a forged row without it is refused at resolution already: test_signed_state.py).
        q.add_event(conn, int(rid), RealizationState.SEALED, RealizationState.PUBLISHED, "forged", "mallory", now)
    return altered


def attach(world: World, manifest: Manifest, signer: str, envelope: bytes) -> None:
    """A signature row for the forged realization, pointing at ``envelope`` (stored as an object)."""
    realization = world.registry.find_by_manifest_hash(manifest.manifest_hash)
    assert realization is not None
    keyid = dsse.parse_envelope(envelope).signatures[0].keyid
    obj = world.platform.store.put(envelope)
    with world.registry.engine.begin() as conn:
        conn.execute(
            insert(s.signatures).values(
                realization_id=realization.id,
                manifest_hash=manifest.manifest_hash,
                envelope_object=obj,
                signer=signer,
                keyid=keyid,
                signed_at=dt.datetime.now(dt.UTC),
            )
        )


def envelope_for(world: World, manifest: Manifest, signer: signing.Signer) -> bytes:
    record = signing.sign_realization(signer, world.platform.store, manifest, builder=signer.identity, quality_report=None)
    return world.platform.store.get(record.envelope_object)


def ref_of(manifest: Manifest) -> str:
    return f"{manifest.dataset}:{manifest.version}@sha256:{manifest.manifest_hash}"


def test_publication_signs_the_manifest_and_training_verifies_it(world: World, published: Realization) -> None:
    status = signing.check_signature(world.platform, published)
    admin = trust.current_identity(world.platform)
    assert (status.status, status.trusted, status.signer, status.publisher) == ("valid", True, admin.name, admin.name)
    assert status.keyid == hashlib.sha256(admin.public_key).hexdigest()
    row = world.registry.signature_of(published.id)
    assert row is not None and row.manifest_hash == published.manifest_hash
    statement = dsse.parse_statement(dsse.parse_envelope(world.platform.store.get(row.envelope_object)))
    manifest = load_manifest(world.registry, published)
    assert statement.predicate["sources"] == [p.to_document() for p in manifest.sources]
    assert statement.predicate["code"] == manifest.code.to_document()  # type: ignore[union-attr]
    assert statement.predicate["content_hash"] == manifest.content_hash and statement.predicate["quality_report"]
    run = train_model(world.platform, published.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    assert run.manifest_hash == published.manifest_hash


def test_training_refuses_a_forged_manifest_with_a_forged_registry_row(world: World, published: Realization) -> None:
    forged = forge(world, published, "unsigned")
    with pytest.raises(UntrustedError, match="no signed statement") as info:
        train_model(world.platform, ref_of(forged), model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    assert info.value.exit_code == 13 and info.value.detail["manifest_hash"] == forged.manifest_hash
    with pytest.raises(UntrustedError):  # by name:version it resolves to the newest publication: a forged one (this or another test's)
        train_model(world.platform, f"{forged.dataset}:{forged.version}", model_name=MODEL_NAME, trainer=TRAINER, seed=7)
    env = {**os.environ, "DSV_HOME": str(world.settings.home)}
    for args in (("verify", ref_of(forged)), ("resolve", "--verify-signature", ref_of(forged))):
        done = subprocess.run([DSV, *args], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 13, done.stderr
        assert done.stderr.strip().splitlines() == [done.stderr.strip()] and "UNTRUSTED: " in done.stderr and forged.manifest_hash in done.stderr
    assert "UNTRUSTED" in subprocess.run([DSV, "verify", ref_of(forged)], env=env, capture_output=True, text=True, timeout=300).stdout
    # dsv reproduce checks the signature before anything else (a dirty code pin included): UNTRUSTED, never DIRTY.
    report = reproduce(world.platform, ref_of(forged), rebuild=False)
    assert report.outcome is Outcome.UNTRUSTED and [c.step for c in report.checks] == ["signature"], report.checks


def test_a_copied_signature_does_not_cover_an_altered_manifest(world: World, published: Realization) -> None:
    forged = forge(world, published, "copied", drop=(1,))
    genuine = world.registry.signature_of(published.id)
    assert genuine is not None
    attach(world, forged, genuine.signer, world.platform.store.get(genuine.envelope_object))
    with pytest.raises(UntrustedError, match="not the manifest the registry names"):
        open_dataset(world.platform, ref_of(forged), purpose="training")


def test_an_envelope_signed_by_a_non_publisher_is_refused(world: World, published: Realization) -> None:
    forged = forge(world, published, "mallory", drop=(2,))
    mallory, _ = trust.create_identity(world.platform, "mallory", by="test")  # registered, holds no publisher grant
    signer = signing.Signer("mallory", mallory.public_key, lambda data: trust.sign_bytes(world.platform, data, identity="mallory"))
    attach(world, forged, "mallory", envelope_for(world, forged, signer))
    with pytest.raises(UntrustedError, match="does not hold the publisher role"):
        train_model(world.platform, ref_of(forged), model_name=MODEL_NAME, trainer=TRAINER, seed=7)


def test_a_tampered_envelope_is_refused(world: World, published: Realization) -> None:
    forged = forge(world, published, "tampered", drop=(0, 1))
    admin = signing.signer_of(world.platform)
    honest = dsse.parse_envelope(envelope_for(world, load_manifest(world.registry, published), admin))
    statement = dsse.parse_statement(honest)
    doc = {
        "_type": dsse.STATEMENT_TYPE,
        "subject": [{"name": statement.subject, "digest": {"sha256": forged.manifest_hash}}],  # the subject rewritten, the signature kept
        "predicateType": dsse.PREDICATE_TYPE,
        "predicate": dict(statement.predicate),
    }
    tampered = dataclasses.replace(honest, payload=canonical_json.dumps(doc))
    attach(world, forged, admin.identity, tampered.to_bytes())
    with pytest.raises(UntrustedError, match="no signature in the envelope verifies"):
        open_dataset(world.platform, ref_of(forged))


def test_an_unsigned_realization_is_refused_in_a_strict_home(tmp_path: Path) -> None:
    own = World.create(tmp_path, days=1)  # a registry of its own: strictness, once recorded in a registry, is never lifted
    published = own.registry.resolve_ref(own.build().ref)
    legacy = dataclasses.replace(published, id=-1, published_at=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))  # no signature row
    assert signing.check_signature(own.platform, legacy).trusted, "published before signing began: allowed with a warning"
    (own.settings.home / trust.STRICT_MARKER).touch()
    status = signing.check_signature(own.platform, legacy)
    assert (status.status, status.trusted) == ("missing", False) and "strict home" in status.reason
    (own.settings.home / trust.STRICT_MARKER).unlink()
    assert not signing.check_signature(own.platform, legacy).trusted, "the registry stays strict without the marker"


def test_dsv_verify_names_builder_publisher_approver_and_the_signature(world: World, published: Realization) -> None:
    import json

    env = {**os.environ, "DSV_HOME": str(world.settings.home)}
    done = subprocess.run([DSV, "verify", published.ref, "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    admin = trust.current_identity(world.platform).name
    assert (doc["ok"], doc["built_by"], doc["published_by"], doc["approved_by"]) == (True, admin, admin, [])
    assert doc["signature"]["status"] == "valid" and doc["signature"]["keyid"] == dsse.keyid_of(trust.current_identity(world.platform).public_key)
    with world.registry.engine.connect() as conn:
        assert conn.execute(select(s.signatures.c.signer).where(s.signatures.c.realization_id == published.id)).scalar() == admin


def test_the_fraud_model_asset_fails_untrusted_on_a_forged_upstream(world: World, published: Realization) -> None:
    import dagster as dg

    from dsv_platform.defs import build_defs, keys
    from dsv_platform.examples.fraud.defs import MODEL_NAME as ASSET
    from dsv_platform.examples.fraud.defs import TRAINING_SET

    forged = forge(world, published, "dagster", drop=(0, 2))
    defs = build_defs(world.settings)
    with dg.DagsterInstance.ephemeral() as instance:  # the upstream snapshot "published" the forged ref (as a moved pointer would say)
        instance.report_runless_asset_event(dg.AssetMaterialization(TRAINING_SET, metadata={"ref": ref_of(forged)}))
        result = dg.materialize([*defs.assets], selection=[keys.model(ASSET)], instance=instance, resources=defs.resources, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    cause = failure.step_failure_data.error.cause  # type: ignore[union-attr]  # Dagster wraps the asset's own exception
    assert cause is not None and cause.cls_name == "UntrustedError" and forged.manifest_hash in cause.message


def test_a_scoped_publisher_signs_and_its_signatures_stop_verifying_when_the_grant_goes(world: World, published: Realization) -> None:
    from dsv_platform.core.trust.trust import Grant, Role
    from dsv_platform.services.publication.publisher import BuildRequest, Publisher

    platform = world.platform
    pub2, _ = trust.create_identity(platform, "pub2", by="test")
    grant = Grant("pub2", Role.PUBLISHER, definition=f"{published.dataset}:{published.version}")
    trust.change_grant(platform, grant, add=True, reason="a second publisher, for this definition only")
    genuine = open_dataset(platform, published.ref)
    parts = [(entry.key, table.slice(1)) for entry, table in genuine.iter_partitions()]  # different rows: another manifest
    signer = signing.Signer("pub2", pub2.public_key, lambda data: trust.sign_bytes(platform, data, identity="pub2"))
    request = BuildRequest(dataset=published.dataset, version=published.version, contract=genuine.contract, request_id="pub2-1", partitions=parts)
    built = Publisher(world.registry, platform.store, actor="pub2", signer=signer).build(request)
    status = signing.check_signature(platform, built.realization)
    assert (status.status, status.signer, status.keyid) == ("valid", "pub2", dsse.keyid_of(pub2.public_key))
    assert open_dataset(platform, built.ref).to_arrow().num_rows == built.manifest.rows
    trust.change_grant(platform, grant, add=False, reason="publisher rotated out")
    with pytest.raises(UntrustedError, match="signer 'pub2' does not hold the publisher role"):
        open_dataset(platform, built.ref)
