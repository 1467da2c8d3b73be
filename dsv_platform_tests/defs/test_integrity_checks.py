"""Integrity signals and quarantine on the Dagster snapshot asset (issue 16 parts 4 and 5).

Real Dagster instance, real embedded stores: one ``integrity_<signal>`` check per signal evaluated by the
build (WARN unless the definition blocks on it), and ``realization_not_quarantined``, which runs on its own
and fails once an operator quarantines the published realization, naming the quarantine.
"""

import dataclasses
import datetime as dt

import dagster as dg
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.dataset_definition import parse_definition
from dsv_platform.core.contracts.integrity_signals import SIGNALS
from dsv_platform.defs import build_defs
from dsv_platform.defs.datasets import build_snapshot_asset
from dsv_platform.defs.integrity_checks import NOT_QUARANTINED
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.quarantine import quarantine
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at
from dsv_platform_tests.scenarios.support import definition

DAYS = ["2026-06-01", "2026-06-02"]
SNAPSHOT = "datasets/fraud_training_set/v6"
KEY = dg.AssetKey.from_user_string(SNAPSHOT)


def test_integrity_checks_are_warn_unless_the_definition_blocks() -> None:
    plain = {s.name: s.blocking for s in build_snapshot_asset(definition("v6")).check_specs if s.name.startswith("integrity_")}
    assert plain == {f"integrity_{s}": False for s in SIGNALS}
    doc = dict(definition("v6").document) | {"integrity": {"blocking": ["unexpected_writer", "duplicate_clusters"], "label_column": "is_fraud"}}
    strict = dataclasses.replace(parse_definition(doc, source="v6.yaml"), gates=definition("v6").gates)
    blocking = {s.name for s in build_snapshot_asset(strict).check_specs if s.blocking and s.name.startswith("integrity_")}
    assert blocking == {"integrity_unexpected_writer", "integrity_duplicate_clusters"}


@pytest.fixture
def pipeline(tmp_path):
    settings = settings_at(tmp_path / "dsv")
    defs = build_defs(settings)
    assets = [*defs.assets]
    drop(settings.drop_folder, [events.daily_batch(FraudDomain(rows_per_day=80), s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with dg.DagsterInstance.ephemeral() as instance:

        def run(selection, **kwargs):
            return dg.materialize(assets, selection=selection, instance=instance, resources=defs.resources, raise_on_error=False, **kwargs)

        assert run("group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1])).success
        assert run("labels/fraud", partition_key="v6").success
        yield settings, run


def test_the_snapshot_shows_its_signals_and_its_quarantine(pipeline) -> None:
    settings, run = pipeline
    built = run(dg.AssetSelection.assets(KEY).without_checks() | dg.AssetSelection.checks_for_assets(KEY) - _quarantine_check())
    assert built.success
    checks = {e.check_name: e for e in built.get_asset_check_evaluations() if e.check_name.startswith("integrity_")}
    assert set(checks) == {f"integrity_{s}" for s in SIGNALS}
    assert all(c.passed and c.severity is dg.AssetCheckSeverity.WARN for c in checks.values())
    assert checks["integrity_duplicate_clusters"].metadata["detail"].value == {"evaluated": False, "note": "label_column is not configured"}
    ref = built.asset_materializations_for_node("datasets__fraud_training_set__v6")[0].metadata["ref"].value

    clean = run(_quarantine_check())
    assert [e.passed for e in clean.get_asset_check_evaluations()] == [True]
    with build_platform(settings) as p:
        quarantine(p, ref, reason="label flips reported by the fraud team")
    held = run(_quarantine_check())
    [evaluation] = held.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity is dg.AssetCheckSeverity.ERROR
    assert evaluation.description == f"QUARANTINED: {ref} by admin: label flips reported by the fraud team"
    assert evaluation.metadata["state"].value == "QUARANTINED" and evaluation.metadata["quarantine"].value["id"] == 1


def _quarantine_check() -> dg.AssetSelection:
    return dg.AssetSelection.checks(dg.AssetCheckKey(dg.AssetKey.from_user_string(SNAPSHOT), NOT_QUARANTINED))
