"""Semantic rules as asset checks on the snapshot asset: one per family, blocking where a rule blocks.

Real Dagster instance, real embedded stores; the fraud v6 contract declares the rules.
"""

import datetime as dt

import dagster as dg
import pytest

from dsv_platform.core.contracts.semantic_rules import families
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.demo_semantic import leaked_test_accounts
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at
from dsv_platform_tests.scenarios.support import definition

ROWS_PER_DAY = 80
DAYS = ["2026-06-01", "2026-06-02"]
SNAPSHOT = "datasets/fraud_training_set/v6"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    settings = settings_at(tmp_path_factory.mktemp("defs-semantic") / "dsv")
    defs = build_defs(settings)
    assets = [*defs.assets]
    domain = FraudDomain(rows_per_day=ROWS_PER_DAY)
    drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with dg.DagsterInstance.ephemeral() as instance:

        def run(selection: str, **kwargs):
            return dg.materialize(assets, selection=selection, instance=instance, resources=defs.resources, raise_on_error=False, **kwargs)

        assert run("group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1])).success
        assert run("labels/fraud", partition_key="v6").success
        yield settings, defs, domain, run


def _checks(result) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations() if e.asset_key.to_user_string() == SNAPSHOT}


def test_one_check_per_family_blocking_where_a_rule_blocks(pipeline):
    _settings, defs, _, run = pipeline
    snapshot = next(a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string(SNAPSHOT) in a.keys)
    specs = {s.name: s for s in snapshot.check_specs if s.name.startswith("semantic_")}  # integrity_*: test_integrity_checks.py
    expected = families(definition("v6").contract)
    assert {n: s.blocking for n, s in specs.items()} == {f"semantic_{f}": b for f, b in expected.items()}
    assert specs["semantic_plausibility"].blocking and not specs["semantic_drift"].blocking
    first = run(SNAPSHOT)
    assert first.success
    checks = {n: c for n, c in _checks(first).items() if n.startswith("semantic_")}
    assert set(checks) == set(specs) and all(c.passed for c in checks.values())
    rules = checks["semantic_plausibility"].metadata["results"].value
    p50 = next(r for r in rules if r["rule"] == "typical_p50")
    assert p50["column"] == "amount" and p50["bound"] == "[5, 200]" and 5 <= float(p50["observed"]) <= 200
    assert checks["semantic_drift"].severity is dg.AssetCheckSeverity.WARN
    assert next(r for r in checks["semantic_drift"].metadata["results"].value)["observed"] == "no baseline"


def test_a_leak_fails_the_run_naming_the_rule_and_publishes_nothing(pipeline):
    settings, _, domain, run = pipeline
    assert run(SNAPSHOT).success  # built here, or reused if this worker ran the test above (no order dependence)
    before = run(SNAPSHOT)  # same pinned inputs: the published realization is reused, its stored results reported
    assert before.success and before.asset_materializations_for_node("datasets__fraud_training_set__v6")[0].metadata["reused"].value is True
    reported = {n: c for n, c in _checks(before).items() if n.startswith("semantic_")}
    assert set(reported) == {f"semantic_{f}" for f in families(definition("v6").contract)} and all(c.passed for c in reported.values())
    drop(settings.drop_folder, [leaked_test_accounts(domain, dt.date(2026, 6, 2), arrived=dt.date(2026, 7, 1), count=3)])
    assert run('key:"raw/transactions" or key:"canonical/transactions"', tags=range_tags(DAYS[-1], DAYS[-1])).success
    assert run("labels/fraud", partition_key="v6").success
    blocked = run(SNAPSHOT)
    assert not blocked.success
    failure = next(e for e in blocked.all_events if e.is_step_failure)
    assert "semantic:population:population:account_id" in failure.step_failure_data.error.to_string()
    assert not [m for m in blocked.get_asset_materialization_events()]
