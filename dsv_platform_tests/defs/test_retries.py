"""Step retries for transient failures only, and the publication pool, on a real Dagster instance.

A registry that refuses connections (a closed local port) is the real transient failure: the step is
retried. A verdict (a contract error, a missing upstream) is a Failure no retry policy repeats.
"""

from dataclasses import replace

import dagster as dg

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.contracts.contract import parse_contract
from dsv_platform.defs import build_defs
from dsv_platform.defs.fanout import build_fanout_snapshot_asset
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import PUBLICATION_POOL, STEP_RETRY, retried_if_transient
from dsv_platform_tests.defs.support import settings_at

CLOSED_PORT = "postgresql+psycopg2://dsv:secret@127.0.0.1:9/dsv"  # nothing listens on the discard port: connection refused
QUICK = dg.RetryPolicy(max_retries=2)  # STEP_RETRY's semantics without its waits
SPLITS = "datasets/fraud_training_set/v6/splits"


def _kinds(result: dg.ExecuteInProcessResult) -> list[str]:
    return [e.event_type_value for e in result.all_events if e.event_type_value in ("STEP_UP_FOR_RETRY", "STEP_FAILURE", "STEP_SUCCESS")]


def test_every_platform_step_retries_transient_failures_and_publishing_steps_hold_the_pool(tmp_path):
    settings = settings_at(tmp_path / "dsv")
    defs = build_defs(settings)
    config = load_config(settings.config_dir)
    configured = [
        a for a in defs.assets
        if isinstance(a, dg.AssetsDefinition) and a.node_def.name.split("__")[0] in ("raw", "canonical", "labels", "datasets", "models") and not a.is_observable
    ]  # the observed table heads are observations: Dagster has no retry policy for those
    platform_steps = [a for a in configured if a.node_def.name != "models__fraud_model"]
    assert len(platform_steps) >= 10 and all(a.op.retry_policy == STEP_RETRY for a in platform_steps)
    pools = {a.node_def.name: a.op.pool for a in platform_steps}
    assert {n for n, p in pools.items() if p == PUBLICATION_POOL} == {f"datasets__{d.name}__{d.version}" for d in config.datasets}
    fanned = build_fanout_snapshot_asset(replace(config.datasets[0], fan_out=2))
    ops = {n.name.rsplit("_", 1)[-1]: n for n in fanned.node_def.node_defs}
    assert ops["seal"].pool == PUBLICATION_POOL and ops["plan"].pool is None and all(o.retry_policy == STEP_RETRY for o in ops.values())


def test_an_unreachable_registry_is_retried_then_fails_naming_it(tmp_path):
    unreachable = replace(settings_at(tmp_path / "dsv"), registry_url=CLOSED_PORT)

    @dg.asset(retry_policy=QUICK)
    def touches_the_registry(platform: PlatformResource) -> None:
        with retried_if_transient():
            platform.get()

    with dg.DagsterInstance.ephemeral() as instance:
        resources = {"platform": PlatformResource.for_settings(unreachable)}
        result = dg.materialize([touches_the_registry], instance=instance, resources=resources, raise_on_error=False)
    assert _kinds(result) == ["STEP_UP_FOR_RETRY", "STEP_UP_FOR_RETRY", "STEP_FAILURE"]
    error = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
    text = error.to_string()
    assert "ServiceUnreachableError" in text and "127.0.0.1" in text and "secret" not in text, text


def test_a_verdict_is_never_retried(tmp_path):
    settings = settings_at(tmp_path / "dsv")

    @dg.asset(retry_policy=QUICK)
    def reads_a_bad_contract() -> None:
        with retried_if_transient():
            parse_contract({"name": "t", "key": ["id"], "columns": [{"name": "id", "type": "float64"}]}, source="t.yaml")

    defs = build_defs(settings)
    with dg.DagsterInstance.ephemeral() as instance:
        bad = dg.materialize([reads_a_bad_contract], instance=instance, raise_on_error=False)
        splits = dg.materialize([*defs.assets], selection=SPLITS, instance=instance, resources=defs.resources, raise_on_error=False)
    assert _kinds(bad) == ["STEP_FAILURE"] and _kinds(splits) == ["STEP_FAILURE"]  # STEP_RETRY on splits: still one attempt
    error = next(e for e in bad.all_events if e.is_step_failure).step_failure_data.error
    assert error.cls_name == "Failure" and error.cause.cls_name == "ContractError" and "a float needs a 'scale'" in error.cause.message
    assert "has not published a realization yet" in next(e for e in splits.all_events if e.is_step_failure).step_failure_data.error.message
