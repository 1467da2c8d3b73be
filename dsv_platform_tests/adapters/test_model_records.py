"""The model registry's records on SQLite and PostgreSQL: approvals, alias compare-and-swap, protected aliases, deployments."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from dsv_platform.adapters.registry.models import ModelRecords, model_pointers
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import AccessDeniedError, NotFoundError
from dsv_platform.core.publication.approval import ProtectedAliasError
from dsv_platform.core.publication.records import StaleAliasError
from dsv_platform.core.publication.states import RealizationState


def h(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelRecords]:
    url = f"sqlite:///{tmp_path_factory.mktemp('models') / 'registry.db'}" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))
    registry = Registry.from_url(url)
    yield ModelRecords.of(registry)
    registry.close()


def test_versions_approvals_and_aliases(models: ModelRecords) -> None:
    a, b = h("run a"), h("run b")
    version, created = models.register("fraud_model", a, trained_on="fraud_training_set:v6@sha256:" + h("m"), trained_by="trainer", actor="trainer")
    assert created and version.state is RealizationState.PUBLISHED
    assert models.register("fraud_model", a, trained_on="x", trained_by="other", actor="other") == (version, False), "idempotent: the first record stays"
    models.register("fraud_model", b, trained_on="y", trained_by="trainer", actor="trainer")

    with pytest.raises(ProtectedAliasError, match="dsv model approve fraud_model@sha256:"):
        models.set_alias("fraud_model", "production", a, expect=None, actor="ops", reason="", audit_as="ops")
    with pytest.raises(AccessDeniedError, match="trained"):
        models.approve(a, reason="looks good", actor="trainer", audit_as="trainer")
    approved, changed = models.approve(a, reason="looks good", actor="reviewer", audit_as="reviewer")
    assert changed and approved.state is RealizationState.ELIGIBLE
    assert models.approve(a, reason="again", actor="reviewer", audit_as="reviewer")[1] is False

    moved = models.set_alias("fraud_model", "production", a, expect=None, actor="ops", reason="first", audit_as="ops")
    assert (moved.run_hash, moved.generation) == (a, 1)
    with pytest.raises(StaleAliasError) as lost:
        models.set_alias("fraud_model", "production", a, expect=b, actor="ops", reason="", audit_as="ops")
    assert lost.value.actual == a
    with pytest.raises(ProtectedAliasError):  # b is not approved
        models.set_alias("fraud_model", "production", b, expect=a, actor="ops", reason="", audit_as="ops")
    with pytest.raises(ProtectedAliasError, match="production"):
        models.revoke(a, reason="regression", actor="reviewer", force=False, audit_as="reviewer")
    revoked, changed, pointing = models.revoke(a, reason="regression", actor="reviewer", force=True, audit_as="reviewer")
    assert changed and revoked.state is RealizationState.PUBLISHED and pointing == ["production"]
    with pytest.raises(NotFoundError, match="version of fraud_model, not other"):
        models.set_alias("other", "staging", b, expect=None, actor="ops", reason="", audit_as="ops")
    assert [m.new_target for m in models.alias_history("fraud_model", "production")] == [a]
    assert [e["to"] for e in models.events(a)] == ["PUBLISHED", "ELIGIBLE", "PUBLISHED"]


def test_a_targets_newest_deployment_is_current(models: ModelRecords) -> None:
    a, b = h("deployed a"), h("deployed b")
    for run in (a, b):
        models.register("fraud_model", run, trained_on="r", trained_by="trainer", actor="trainer")
    first = models.record_deployment("eu", a, actor="ops", reason="", audit_as="ops")
    assert first.current and first.node == f"deployment:eu@{a}"
    models.record_deployment("us", a, actor="ops", reason="", audit_as="ops")
    models.record_deployment("eu", b, actor="ops", reason="rollout", audit_as="ops")
    models.set_alias("fraud_model", "staging", b, expect=None, actor="ops", reason="", audit_as="ops")
    current = {(d.target, d.run_hash) for d in models.deployments(current_only=True)}
    assert current == {("eu", b), ("us", a)}
    assert [d.current for d in models.deployments(target="eu")] == [True, False]
    with pytest.raises(NotFoundError):
        models.record_deployment("eu", h("never trained"), actor="ops", reason="", audit_as="ops")
    with models._read() as conn:
        assert model_pointers(conn) == [("model_alias", "fraud_model@staging", b), ("deployment", "eu", b), ("deployment", "us", a)]
