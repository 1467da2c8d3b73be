"""A restricted source column published without an access block covering it is a failed check and a failed step (issue 27 item 9).

Real Dagster instance (persistent, on disk), real embedded stores, the fraud v6 definition. The transactions source marks
``merchant_risk`` restricted: the build is blocked naming the column and the fix; with ``access.restricted_columns``
covering it the same rows publish (the same manifest as the blocked candidate), and a later reused build reports the
gates that let it publish, not the blocked ones stored for the same manifest before.
"""

import dataclasses
import datetime as dt
import shutil
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.cli.runs import open_instance
from dsv_platform.core.privacy.publication_gates import RESTRICTED, SUBJECTS
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.defs import build_defs
from dsv_platform.defs.gate_checks import DATASET_GATES
from dsv_platform.examples.fraud import CONFIG_DIR, events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.publication.semantic_gate import stored_gates
from dsv_platform_tests.defs.support import FRAUD_SOURCES, drop, range_tags, settings_at

DAYS = ["2026-06-01", "2026-06-02"]
SNAPSHOT = "datasets/fraud_training_set/v6"
MERCHANT_RISK = "  - {name: merchant_risk, type: float64, scale: 4, nullable: true}\n"


def _config_marking_merchant_risk(folder: Path) -> Path:
    """The fraud example's configuration, its transactions source marking ``merchant_risk`` restricted."""
    shutil.copytree(CONFIG_DIR, folder)
    source = folder / "sources" / "transactions.yaml"
    text = source.read_text()
    assert MERCHANT_RISK in text
    source.write_text(text.replace(MERCHANT_RISK, MERCHANT_RISK.replace("nullable: true}", "nullable: true, restricted: true}")))
    return folder


def _gates_check(instance: dg.DagsterInstance) -> tuple[str, dg.AssetCheckEvaluation]:
    key = dg.AssetCheckKey(dg.AssetKey.from_user_string(SNAPSHOT), DATASET_GATES)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    assert record.event is not None and record.event.dagster_event is not None
    return record.run_id, record.event.dagster_event.event_specific_data


@pytest.mark.slow  # about 50 s: ingest, labels and four snapshot runs on a persistent instance
def test_an_uncovered_restricted_column_blocks_and_covering_it_publishes(tmp_path) -> None:
    settings = dataclasses.replace(settings_at(tmp_path / "dsv"), config_dir=_config_marking_merchant_risk(tmp_path / "config"))
    definition_file = settings.config_dir / "datasets" / "fraud_training_set_v6.yaml"
    drop(settings.drop_folder, [events.daily_batch(FraudDomain(rows_per_day=60), s, dt.date.fromisoformat(d)) for s in FRAUD_SOURCES for d in DAYS])
    with open_instance(settings) as instance:

        def run(selection: str, **kwargs):  # type: ignore[no-untyped-def]
            defs = build_defs(settings)  # the configuration folder as it is now
            return dg.materialize([*defs.assets], selection=selection, instance=instance, resources=defs.resources, raise_on_error=False, **kwargs)

        assert run("group:raw or group:canonical", tags=range_tags(DAYS[0], DAYS[-1])).success
        assert run("labels/fraud", partition_key="v6").success

        blocked = run(SNAPSHOT)
        assert not blocked.success and not blocked.get_asset_materialization_events()
        run_id, check = _gates_check(instance)
        assert run_id == blocked.run_id and not check.passed
        assert check.metadata["rule"].value == "restricted_columns_have_access" and check.metadata["column"].value == "merchant_risk"
        failure = next(e for e in blocked.all_events if e.is_step_failure).step_failure_data
        assert failure.error.cause.cls_name == "GatesFailedError"
        said = failure.error.cause.message
        assert "not covered: merchant_risk (restricted by transactions)" in said, said
        assert f"add `access: {{restricted_columns: [merchant_risk]}}` to {definition_file}" in said, said
        [failed] = _failed_candidates(settings)

        definition_file.write_text(definition_file.read_text() + "access: {restricted_columns: [merchant_risk]}\n")  # the fix the failure names
        published = run(SNAPSHOT)
        assert published.success
        [materialization] = published.asset_materializations_for_node("datasets__fraud_training_set__v6")
        manifest_hash = materialization.metadata["manifest_hash"].value
        assert manifest_hash == failed.manifest_hash, "the blocked candidate and the publication hold the same rows: one manifest, two reports"
        assert _gates_check(instance)[1].passed
        assert _usable(settings) == materialization.metadata["ref"].value, "dsv status reads the report it published with too"

        reused = run(SNAPSHOT)
        [again] = reused.asset_materializations_for_node("datasets__fraud_training_set__v6")
        assert reused.success and again.metadata["reused"].value is True
        run_id, check = _gates_check(instance)
        assert run_id == reused.run_id and check.passed, "a reused build reports the report it published with"


def _failed_candidates(settings):  # type: ignore[no-untyped-def]
    """The FAILED candidates of fraud_training_set (read from the registry), each with a failed restricted-columns gate."""
    from dsv_platform.bootstrap import build_platform

    with build_platform(settings) as platform:
        failed = [r for r in platform.registry.versions("fraud_training_set", include_candidates=True) if r.state is RealizationState.FAILED]
        for r in failed:
            gates = {g.name: g for g in stored_gates(platform, r.manifest_hash, None)}
            assert not gates[RESTRICTED].passed and gates[SUBJECTS].passed
        return failed


def _usable(settings):  # type: ignore[no-untyped-def]
    """What `dsv status` names as fraud_training_set:v6's usable realization (the newest that passed every gate)."""
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.services.publication.status import platform_status

    with build_platform(settings) as platform:
        [status] = [s for s in platform_status(platform) if s.ref == "fraud_training_set:v6"]
        return status.usable_ref
