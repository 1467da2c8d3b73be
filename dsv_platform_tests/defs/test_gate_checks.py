"""A blocking gate failure shows as failed asset checks naming rule, observed value and bound, and as a Failure of the step.

Real Dagster instance (persistent, on disk), real embedded stores; the fraud v6 definition with a row-count
gate no build can meet fails, the unchanged definition publishes in the publication pool.
"""

import datetime as dt
from dataclasses import replace

import dagster as dg
import pytest

from dsv_platform.cli.runs import open_instance
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.defs import build_defs
from dsv_platform.defs.gate_checks import DATASET_GATES
from dsv_platform.defs.retries import PUBLICATION_POOL
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at

ROWS_PER_DAY = 60
DAYS = ["2026-06-01", "2026-06-02"]
SNAPSHOT = "datasets/fraud_training_set/v6"
FAILING = "datasets/fraud_training_set/v5"  # its own dataset: a FAILED candidate keeps its request id (same pinned inputs)
UNREACHABLE = 10**9


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    home = tmp_path_factory.mktemp("defs-gate-checks")
    settings = settings_at(home / "dsv")
    config = load_config(settings.config_dir)
    domain = FraudDomain(rows_per_day=ROWS_PER_DAY)
    drop(settings.drop_folder, [events.daily_batch(domain, s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with open_instance(settings) as instance:  # the instance `dsv build` runs on (its dagster.yaml: one slot per pool)

        def run(selection: str, *, config=config, **kwargs):
            defs = build_defs(settings, config)
            return dg.materialize([*defs.assets], selection=selection, instance=instance, resources=defs.resources, raise_on_error=False, **kwargs)

        ingest = run("group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1]))
        assert ingest.success
        labels = run("labels/fraud", partition_key="v6")
        assert labels.success and run("labels/fraud", partition_key="v5").success
        yield settings, config, instance, run, (ingest, labels)


def _unmeetable(config):
    """``config`` with fraud v5 asking for more rows than any build has."""
    datasets = [replace(d, gates=replace(d.gates, rows_at_least=UNREACHABLE)) if d.ref == "fraud_training_set:v5" else d for d in config.datasets]
    return replace(config, datasets=datasets)


def test_a_fanned_out_build_reports_its_failed_gates_the_same_way(pipeline):
    _settings, config, instance, run, _ = pipeline
    v5 = config.dataset("fraud_training_set", "v5")
    fanned = replace(v5, version="v5f", fan_out=2, gates=replace(v5.gates, rows_at_least=UNREACHABLE))  # its own version: its own candidate
    asset = f"datasets/{fanned.name}/{fanned.version}"
    failed = run(asset, config=replace(config, datasets=[*config.datasets, fanned]))
    assert not failed.success and not failed.get_asset_materialization_events()
    run_id, gates = _evaluation(instance, DATASET_GATES, asset)
    assert run_id == failed.run_id and not gates.passed and gates.metadata["rule"].value == "rows_at_least"
    failure = next(e for e in failed.all_events if e.is_step_failure)
    assert failure.step_key == f"datasets__{fanned.name}__{fanned.version}.{fanned.asset_prefix}_seal"  # the graph asset's node, then its seal op
    assert "rows_at_least" in failure.step_failure_data.user_failure_data.description


def _evaluation(instance: dg.DagsterInstance, check: str, asset: str = SNAPSHOT) -> tuple[str, dg.AssetCheckEvaluation]:
    """The run of the latest evaluation of ``check`` on ``asset``, and the evaluation (as the instance stored it)."""
    key = dg.AssetCheckKey(dg.AssetKey.from_user_string(asset), check)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    assert record.event is not None and record.event.dagster_event is not None
    evaluation = record.event.dagster_event.event_specific_data
    assert isinstance(evaluation, dg.AssetCheckEvaluation)
    return record.run_id, evaluation


def test_a_failed_blocking_gate_is_a_failed_check_naming_rule_observed_and_bound(pipeline):
    settings, config, instance, run, _ = pipeline
    failed = run(FAILING, config=_unmeetable(config))
    assert not failed.success and not failed.get_asset_materialization_events()
    run_id, gates = _evaluation(instance, DATASET_GATES, FAILING)
    assert run_id == failed.run_id and not gates.passed and gates.severity is dg.AssetCheckSeverity.ERROR
    meta = {k: v.value for k, v in gates.metadata.items()}
    assert meta["rule"] == "rows_at_least" and meta["bound"] == f">= {UNREACHABLE} rows" and 0 < int(meta["observed"]) < UNREACHABLE
    rows = {r.data["rule"]: r.data for r in gates.metadata["gates"].value.records}
    assert rows["rows_at_least"]["passed"] is False and rows["rows_at_least"]["blocking"] is True
    snapshot = next(a for a in build_defs(settings, config).assets if isinstance(a, dg.AssetsDefinition) and dg.AssetKey.from_user_string(FAILING) in a.keys)
    specs = {s.name for s in snapshot.check_specs}
    executed = {c for c in specs if _evaluation(instance, c, FAILING)[0] == failed.run_id}
    assert executed == specs, f"not executed: {specs - executed}"  # every check has a result, none "not executed"
    assert len(specs) > 1 and _evaluation(instance, "integrity_unapproved_snapshot", FAILING)[1].passed
    failure = next(e for e in failed.all_events if e.is_step_failure)
    data = failure.step_failure_data
    assert data.error.cls_name == "Failure" and data.error.cause.cls_name == "GatesFailedError"
    assert "rows_at_least" in data.user_failure_data.description and f">= {UNREACHABLE} rows" in data.user_failure_data.description
    table = data.user_failure_data.metadata["failed_rules"].value
    assert [(r.data["gate"], r.data["bound"]) for r in table.records] == [("rows_at_least", f">= {UNREACHABLE} rows")]
    assert not [e for e in failed.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"], "a gate verdict is never retried"


def test_a_publication_takes_a_slot_of_the_publication_pool_and_reports_every_check(pipeline):
    _settings, _config, instance, run, _ = pipeline
    published = run(SNAPSHOT)
    assert published.success
    run_id, gates = _evaluation(instance, DATASET_GATES)
    assert run_id == published.run_id and gates.passed and "rule" not in gates.metadata
    info = instance.event_log_storage.get_concurrency_info(PUBLICATION_POOL)
    assert info.slot_count == 1 and not info.pending_step_count  # the pool was used (default limit 1) and released


def test_materializations_carry_the_catalog_table_name_and_row_count(pipeline):
    _settings, _config, _instance, run, (ingest, labels) = pipeline
    for canonical in ingest.asset_materializations_for_node("canonical__transactions"):  # one per day of the ranged run
        assert canonical.metadata["dagster/table_name"].value == "canonical.transactions"
        assert canonical.metadata["dagster/row_count"].value == canonical.metadata["rows"].value > 0
    [label] = labels.asset_materializations_for_node("labels__fraud")
    assert label.metadata["dagster/table_name"].value == "canonical.labels_fraud_v6" and label.metadata["dagster/row_count"].value > 0
    published = run(SNAPSHOT)  # published by the test above, or built here: the same realization
    [snapshot] = published.asset_materializations_for_node("datasets__fraud_training_set__v6")
    assert snapshot.metadata["dagster/table_name"].value == "datasets.fraud_training_set.v6"
    assert snapshot.metadata["dagster/row_count"].value == snapshot.metadata["rows"].value > 0
