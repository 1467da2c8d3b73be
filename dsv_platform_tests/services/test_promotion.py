"""The promotion gate refuses each bad case and names it; a good model moves the production alias."""

from __future__ import annotations

import pytest

from dsv_platform.services.publication.approval import approve
from dsv_platform.services.reproduction.promotion import PromotionRefusedError, Refusal, promote
from dsv_platform_tests.services.reproduce_support import Lab, corrupted


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab.create(tmp_path_factory.mktemp("promotion"))


def test_promote_moves_production_alias_for_a_sound_model(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    approve(lab.world.registry, build.ref, reason="quality report reviewed", actor="release")
    done = promote(lab.platform, run.run_hash, actor="release")
    alias = lab.world.registry.get_alias("fraud_training_set", "v6", "production")
    assert alias is not None and alias.target == build.manifest_hash
    assert done.model_id == f"model_run:{run.run_hash}"
    edges = lab.world.registry.lineage_edges(node=("model_run", run.run_hash))
    assert any(e.relation == "promoted_to" for e in edges)


def test_promote_refuses_missing_run_manifest(lab: Lab) -> None:
    with pytest.raises(PromotionRefusedError) as err:
        promote(lab.platform, "cd" * 32)
    assert err.value.refusal is Refusal.RUN_MANIFEST_MISSING


def test_promote_refuses_unresolvable_realization(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    lab.expire(build, delete_objects=False)
    with pytest.raises(PromotionRefusedError) as err:
        promote(lab.platform, run.run_hash)
    assert err.value.refusal is Refusal.REALIZATION_UNRESOLVED and "EXPIRED" in str(err.value)


def test_promote_refuses_hash_mismatch(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    approve(lab.world.registry, build.ref, reason="quality report reviewed", actor="release")
    victim = build.manifest.partitions[0].object
    before = lab.world.registry.get_alias("fraud_training_set", "v6", "production")
    with corrupted(lab.world.store, victim), pytest.raises(PromotionRefusedError) as err:
        promote(lab.platform, run.run_hash)
    assert err.value.refusal is Refusal.HASH_MISMATCH and victim in str(err.value)
    assert lab.world.registry.get_alias("fraud_training_set", "v6", "production") == before, "a refusal moves nothing"


def test_promote_refuses_a_model_whose_realization_is_not_eligible(lab: Lab) -> None:
    build = lab.fresh()
    run = lab.model(build)
    before = lab.world.registry.get_alias("fraud_training_set", "v6", "production")
    with pytest.raises(PromotionRefusedError) as err:
        promote(lab.platform, run.run_hash)
    assert err.value.refusal is Refusal.NOT_ELIGIBLE and err.value.exit_code == 8
    assert build.ref in str(err.value) and "PUBLISHED" in str(err.value) and "dsv approve" in str(err.value)
    assert lab.world.registry.get_alias("fraud_training_set", "v6", "production") == before, "a refusal moves nothing"
    approve(lab.world.registry, build.ref, reason="reviewed", actor="release")
    promote(lab.platform, run.run_hash, actor="release")
    assert lab.world.registry.get_alias("fraud_training_set", "v6", "production").target == build.manifest_hash  # type: ignore[union-attr]
