"""Privacy deletion end to end on a real registry (SQLite, PostgreSQL) and a real local object store.

Subject-bearing realizations are written through Publisher into the
EncryptingObjectStore; a deletion crypto-erases their objects, marks them
REDACTED with a new redaction generation, lists the models trained on them, is
idempotent, excludes the subject from new realizations, and survives restoring
an old backup of the key/object store or of the registry.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest
from cryptography.exceptions import InvalidTag

from dsv_platform import open_dataset
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.envelope import unseal
from dsv_platform.adapters.registry.governance import GovernanceRecords
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.errors import ObjectErasedError, RedactedError, RedactionNotReconciledError
from dsv_platform.core.privacy.privacy import DescendantKind, Outcome
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.services.privacy.privacy import PrivacyCoordinator, PrivacyPlanStaleError
from dsv_platform.services.publication.publisher import Publisher
from dsv_platform.settings import Settings, load_settings
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

PARTS = pw.partitions(rows=60)
SUBJECT = str(PARTS[0][1].column("account_id")[0])

FRAUD_CONFIG = load_config(CONFIG_DIR)  # its sources' entity (account_id) is the subject column


def settings_for(tmp_path: Path, url: str) -> Settings:
    return dataclasses.replace(load_settings({}).with_home(tmp_path / "home"), registry_url=url, actor="privacy-officer")


def publish(reg: Registry, store: EncryptingObjectStore, request_id: str, **kw: object) -> str:
    return Publisher(reg, store, actor="builder", **kw).build(pw.request(request_id, logical_key=request_id, parts=PARTS)).ref  # type: ignore[arg-type]


def holds_subject(reg: Registry, ref: str, settings: Settings) -> bool:
    table = open_dataset(ref, settings=settings).to_arrow()
    return bool(pc.any(pc.equal(table.column("account_id"), SUBJECT)).as_py())


def test_privacy_deletion_end_to_end(backend_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, backend_url)
    store = build_encrypted_store(settings)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        ref = publish(reg, store, "r-before")
        manifest_hash = ref.split("@sha256:")[1]
        reg.record_lineage([("realization", manifest_hash, "model_run", "run-42", "trained", {"ref": ref})], actor="trainer")
        assert holds_subject(reg, ref, settings)
        coordinator = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG)

        plan = coordinator.plan(SUBJECT, "GDPR art. 17 request #1")
        assert plan.affected_realizations == [manifest_hash]
        assert SUBJECT not in str(plan.to_document())  # only the salted hash is recorded
        erased = plan.by_outcome(Outcome.CRYPTO_ERASED)
        assert erased and all(d.descendant.kind is DescendantKind.PARTITION_OBJECT for d in erased)

        report = coordinator.apply(plan)
        assert report.created and report.generation == 1 == reg.redaction_generation() == store.keys.generation()
        assert {o["outcome"] for o in report.outcomes} == {"crypto_erased", "deleted"}
        assert report.models == [{"kind": "model_run", "id": "run-42", "realization": manifest_hash, "relation": "trained"}]

        # the typed REDACTED answer with the generation; never a fallback to another version
        with pytest.raises(RedactedError) as info:
            open_dataset(ref, settings=settings)
        assert info.value.detail["redaction_generation"] == 1
        with pytest.raises(RedactedError):
            open_dataset(f"{pw.NAME}:{pw.VERSION}", settings=settings)
        assert reg.get(reg.find_by_manifest_hash(manifest_hash).id).state is RealizationState.REDACTED  # type: ignore[union-attr]

        # a crypto-erased object can no longer be decrypted
        victim = next(o for o in report.outcomes if o["outcome"] == "crypto_erased")
        with pytest.raises(ObjectErasedError):
            store.get(victim["id"])
        ciphertext = store.sealed_store.get(victim["detail"]["sealed_object"])
        assert SUBJECT.encode() not in ciphertext
        with pytest.raises(InvalidTag):
            unseal(os.urandom(32), victim["id"], ciphertext)

        # idempotent rerun: same outcomes, the generation is not raised twice
        again = coordinator.delete(SUBJECT, "GDPR art. 17 request #1")
        assert not again.created and again.generation == 1 == reg.redaction_generation()
        assert again.outcomes == report.outcomes

        # new realizations exclude the deleted subject
        fresh = publish(reg, store, "r-after", row_filter=coordinator.exclusion_filter())
        assert not holds_subject(reg, fresh, settings)
        assert open_dataset(fresh, settings=settings).verify_content()
        assert coordinator.status(SUBJECT)["deleted"] is True


def test_privacy_deletion_refuses_a_stale_plan_and_honours_legal_bases(backend_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, backend_url)
    store = build_encrypted_store(settings)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        ref = publish(reg, store, "r-held")
        coordinator = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG)
        other = str(PARTS[1][1].column("account_id")[5])
        stale = coordinator.plan(SUBJECT, "request #2")
        coordinator.delete(other, "request #3", retain={DescendantKind.REALIZATION: "litigation hold L-7"})
        with pytest.raises(PrivacyPlanStaleError, match="plan again"):
            coordinator.apply(stale)
        held = coordinator.status(other)["outcomes"]
        assert held and {o["outcome"] for o in held} == {"retained"} and {o["legal_basis"] for o in held} == {"litigation hold L-7"}
        assert open_dataset(ref, settings=settings).verify_content()  # retained: still readable


def test_restored_key_store_backup_does_not_resurrect_erased_data(backend_url: str, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, backend_url)
    store = build_encrypted_store(settings)
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
        ref = publish(reg, store, "r-backup")
        backup = tmp_path / "backup"
        shutil.copytree(settings.key_store, backup / "keys")
        shutil.copytree(settings.object_store, backup / "objects")
        coordinator = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG)
        report = coordinator.delete(SUBJECT, "request #4")
        fresh = publish(reg, store, "r-after-delete", row_filter=coordinator.exclusion_filter())
        victim = next(o["id"] for o in report.outcomes if o["outcome"] == "crypto_erased")

        # restore the OLD key store and object store: the key of the erased object is back on disk
        shutil.rmtree(settings.key_store)
        shutil.copytree(backup / "keys", settings.key_store)
        shutil.rmtree(settings.object_store)
        shutil.copytree(backup / "objects", settings.object_store)
        restored = build_encrypted_store(settings)
        assert restored.keys.generation() == 0 < reg.redaction_generation()
        with pytest.raises(RedactedError):
            open_dataset(ref, settings=settings)  # the registry still answers REDACTED
        with pytest.raises(RedactionNotReconciledError, match="reconcile"):
            open_dataset(fresh, settings=settings)  # every read is refused until reconciled

        result = PrivacyCoordinator(reg, restored, actor="privacy-officer", config=FRAUD_CONFIG).reconcile()
        assert victim in {o["id"] for o in result.reapplied}
        with pytest.raises(ObjectErasedError):
            restored.get(victim)
        assert restored.keys.generation() == reg.redaction_generation()


def test_restored_registry_backup_is_reconciled_before_reading(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    settings = settings_for(tmp_path, url)
    store = build_encrypted_store(settings)
    with Registry.from_url(url) as reg:
        pw.register(reg)
        ref = publish(reg, store, "r-reg-backup")
    shutil.copy(tmp_path / "registry.db", tmp_path / "registry.backup")
    with Registry.from_url(url) as reg:
        PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG).delete(SUBJECT, "request #5")
    shutil.copy(tmp_path / "registry.backup", tmp_path / "registry.db")  # the old registry says PUBLISHED
    with Registry.from_url(url) as reg:
        assert reg.redaction_generation() == 0
        with pytest.raises(RedactionNotReconciledError, match="older registry backup"):
            open_dataset(ref, settings=settings)
        result = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG).reconcile()
        assert result.redacted == [ref.split("@sha256:")[1]]
        with pytest.raises(RedactedError) as info:
            open_dataset(ref, settings=settings)
        assert info.value.detail["redaction_generation"] >= 1  # type: ignore[operator]


def test_privacy_deletion_job_runs(tmp_path: Path) -> None:
    from dsv_platform.defs.privacy import privacy_deletion_job
    from dsv_platform.defs.resources import build_resources

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    settings = settings_for(tmp_path, url)
    with Registry.from_url(url) as reg:
        pw.register(reg)
        ref = publish(reg, build_encrypted_store(settings), "r-job")
        reg.record_lineage([("realization", ref.split("@sha256:")[1], "model_run", "run-job", "trained", {"model": "fraud_model"})], actor="trainer")
    resources = build_resources(settings)
    result = privacy_deletion_job.execute_in_process(
        run_config={"ops": {"delete_subject": {"config": {"subject": SUBJECT, "reason": "request #6"}}}}, resources={"platform": resources["platform"]}
    )
    assert result.success and result.output_for_node("delete_subject") == 1
    with pytest.raises(RedactedError):
        open_dataset(ref, settings=settings)
    with Registry.from_url(url) as reg:  # the model trained on it has its obligation, under the example's model_governance (platform.yaml)
        (obligation,) = GovernanceRecords(reg).obligations(r.request_id for r in reg.privacy.requests())
    assert (obligation.model_run, obligation.family, obligation.policy, obligation.decision) == ("run-job", "fraud_model", "retrain_required", None)
    assert obligation.policy_source == "model_governance.families.fraud_model"
