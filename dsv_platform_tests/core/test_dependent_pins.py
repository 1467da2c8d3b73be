"""Dependent pins in the pure GC plan: told from scratch by name AND registry record; kept while retained, then aged out.

The end-to-end path (real pyiceberg catalog, ``dsv gc``) is scenarios/test_dependent_pins.py; here every case of the
rule, on plain inventories, including the ones an insider could stage (a scratch tag named like a report's pin, a
record whose tag is named for another owner).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsv_platform.core.config.platform_options import parse_options
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.lineage.lineage import Edge
from dsv_platform.core.retention.dependent_pins import (
    RETAINED_REF_AGE_MS,
    DependentPinError,
    dependent_tag,
    parse_dependent_tag,
    pin_edge,
    recorded_pin,
)
from dsv_platform.core.retention.gc import GcPlan, GcPolicy, Inventory, RootSpec, SnapshotInfo, TagInfo, plan_gc
from dsv_platform.core.retention.policy import DEFAULT_MAX_REF_AGE

NOW = datetime(2030, 1, 1, tzinfo=UTC)
SNAP_AT = NOW - timedelta(days=100)
RUN, ART = "ab" * 32, "cd" * 32
MODEL_TAG = f"model-fraud_model-{RUN[:12]}"
REPORT_TAG = f"report-quarterly-{ART[:12]}"
POLICY = GcPolicy(safety_window=timedelta(0), keep_heads=False, max_ref_age=timedelta(days=10))


def _plan(tags: list[TagInfo], edges: list[Edge], roots: list[RootSpec], now: datetime = NOW) -> GcPlan:
    snaps = [SnapshotInfo("transactions", 1, SNAP_AT, False), SnapshotInfo("transactions", 2, NOW, True)]
    return plan_gc(Inventory(observed_at=now, watermark={}, snapshots=snaps, tags=tags, lineage=edges, roots=roots), POLICY)


def _tag(plan: GcPlan, name: str) -> tuple[bool, str, str | None, str]:
    d = plan.index()[("iceberg_tag", f"transactions#{name}")]
    return d.keep, d.reason, d.action, d.detail


MODEL_ROOT = RootSpec("1", "model_version", f"model_run:{RUN}", "retained", "ml")
MODEL_EDGE = pin_edge("transactions", MODEL_TAG, 1, ("model_run", RUN), name="fraud_model")


def test_names_carry_the_owner_and_parse_back() -> None:
    assert dependent_tag("model_run", "fraud_model", RUN) == MODEL_TAG
    assert dependent_tag("artifact", "quarterly", ART) == REPORT_TAG
    assert dependent_tag("artifact", "quarterly", ART, snapshot_id=7) == f"{REPORT_TAG}@7"
    assert parse_dependent_tag(MODEL_TAG) == ("model_run", "fraud_model", RUN[:12], None)
    assert parse_dependent_tag(f"{REPORT_TAG}@7") == ("artifact", "quarterly", ART[:12], 7)
    assert parse_dependent_tag("fraud_training_set-v6-0123456789abcdef0123") is None, "a realization's pin is no dependent pin"
    assert dependent_tag("artifact", "q1 report#2/x@y", ART) == f"report-q1_report_2_x_y-{ART[:12]}", "a tag-safe name"
    assert recorded_pin(pin_edge("t", f"report-q1_report-{ART[:12]}", 1, ("artifact", ART), name="q1 report")) is not None
    for kind, name, digest in (("realization", "x", ART), ("artifact", "", ART), ("artifact", "x", "not-hex-at-all")):
        with pytest.raises(DependentPinError):
            dependent_tag(kind, name, digest)


def test_a_record_counts_only_when_it_agrees_with_the_tags_name() -> None:
    assert recorded_pin(MODEL_EDGE) is not None
    other_owner = pin_edge("transactions", MODEL_TAG, 1, ("model_run", "ef" * 32), name="fraud_model")  # hash12 is another run's
    renamed = pin_edge("transactions", MODEL_TAG, 1, ("model_run", RUN), name="other_model")
    wrong_kind = pin_edge("transactions", MODEL_TAG, 1, ("artifact", RUN), name="fraud_model")
    scratch_name = pin_edge("transactions", "my-scratch", 1, ("model_run", RUN), name="fraud_model")
    other_snapshot = pin_edge("transactions", f"{REPORT_TAG}@7", 1, ("artifact", ART), name="quarterly")
    for edge in (other_owner, renamed, wrong_kind, scratch_name, other_snapshot):
        assert recorded_pin(edge) is None, edge


def test_a_retained_pin_is_kept_and_keeps_its_age() -> None:
    plan = _plan([TagInfo("transactions", MODEL_TAG, 1, RETAINED_REF_AGE_MS)], [MODEL_EDGE], [MODEL_ROOT])
    assert _tag(plan, MODEL_TAG) == (True, "reachable from a root", None, "")
    assert plan.index()[("iceberg_snapshot", "transactions@1")].keep, "its snapshot is kept with it"


def test_a_scratch_tag_named_like_a_pin_is_collected_by_name_alone_never_kept() -> None:
    forged = f"report-quarterly-{'0' * 12}"
    tags = [TagInfo("transactions", forged, 1, RETAINED_REF_AGE_MS), TagInfo("transactions", MODEL_TAG, 1, RETAINED_REF_AGE_MS)]
    plan = _plan(tags, [], [MODEL_ROOT])  # no registry record: the model's own tag name does not protect it either
    for name in (forged, MODEL_TAG):
        keep, reason, action, _ = _tag(plan, name)
        assert not keep and action == "remove_tag" and "registry records no such pin (scratch)" in reason


def test_a_record_for_a_tag_named_for_another_owner_protects_nothing() -> None:
    insider = pin_edge("transactions", REPORT_TAG, 1, ("model_run", RUN), name="quarterly")  # a report's name, recorded for a model
    plan = _plan([TagInfo("transactions", REPORT_TAG, 1, RETAINED_REF_AGE_MS)], [insider], [MODEL_ROOT])
    assert _tag(plan, REPORT_TAG)[:3] == (False, "named like a dependent pin, but the registry records no such pin (scratch)", "remove_tag")


def test_released_pin_ages_out_over_the_configured_max_ref_age_then_goes() -> None:
    tags = [TagInfo("transactions", MODEL_TAG, 1, RETAINED_REF_AGE_MS)]
    plan = _plan(tags, [MODEL_EDGE], [])  # the root is gone
    keep, reason, action, detail = _tag(plan, MODEL_TAG)
    set_to = (NOW - SNAP_AT + POLICY.max_ref_age) // timedelta(milliseconds=1)
    assert keep and action == "set_ref_age" and detail == f"max_ref_age_ms={set_to}" and "no longer retained" in reason
    assert [r.kind for r in plan.roots] == ["table_head", "ageing_pin"] and plan.roots[1].expires_at == NOW + POLICY.max_ref_age
    assert plan.index()[("iceberg_snapshot", "transactions@1")].keep, "an ageing pin keeps its snapshot"
    ageing = [TagInfo("transactions", MODEL_TAG, 1, set_to)]
    assert _tag(_plan(ageing, [MODEL_EDGE], [], NOW + timedelta(days=9)), MODEL_TAG)[:3] == (True, reason, None)
    gone = _plan(ageing, [MODEL_EDGE], [], NOW + timedelta(days=11))
    keep, reason, action, _ = _tag(gone, MODEL_TAG)
    assert not keep and action == "remove_tag" and "past its max ref age" in reason
    assert not gone.index()[("iceberg_snapshot", "transactions@1")].keep


def test_retained_again_the_pin_gets_the_retained_age_back() -> None:
    plan = _plan([TagInfo("transactions", MODEL_TAG, 1, 5)], [MODEL_EDGE], [MODEL_ROOT])
    assert _tag(plan, MODEL_TAG) == (True, "reachable from a root", "set_ref_age", f"max_ref_age_ms={RETAINED_REF_AGE_MS}")
    assert [d.id for d in plan.upkeep()] == [f"transactions#{MODEL_TAG}"] and not plan.collectable("set_ref_age")
    assert GcPlan.from_document(plan.to_document()).upkeep() == plan.upkeep(), "a plan file carries the upkeep"


def test_max_ref_age_is_platform_configuration_validated(tmp_path: Path) -> None:
    file = tmp_path / "platform.yaml"
    assert parse_options({}, file=file).gc.max_ref_age == DEFAULT_MAX_REF_AGE == timedelta(days=30)
    assert parse_options({"gc": {"max_ref_age_days": 7}}, file=file).gc.max_ref_age == timedelta(days=7)
    assert GcPolicy(max_ref_age=timedelta(days=7)).with_hours(1).max_ref_age == timedelta(days=7), "a window override keeps it"
    for bad in (-1, "30d", True, float("nan"), 3651):
        with pytest.raises(ConfigError, match=r"gc\.max_ref_age_days") as refused:
            parse_options({"gc": {"max_ref_age_days": bad}}, file=file)
        assert "platform.yaml" in str(refused.value)


@pytest.mark.parametrize(
    ("root", "tag", "edge"),
    [
        (RootSpec("7", "legal_hold", f"model_run:{RUN}", "case 12", "legal"), MODEL_TAG, MODEL_EDGE),
        (RootSpec("8", "artifact", f"artifact:{ART}", "quarterly report", "finance"), REPORT_TAG,
         pin_edge("transactions", REPORT_TAG, 1, ("artifact", ART), name="quarterly")),
    ],
)  # fmt: skip
def test_any_root_reaching_the_owner_keeps_its_pin(root: RootSpec, tag: str, edge: Edge) -> None:
    plan = _plan([TagInfo("transactions", tag, 1, RETAINED_REF_AGE_MS)], [edge], [root])
    assert _tag(plan, tag)[:3] == (True, "reachable from a root", None) and plan.index()[("iceberg_tag", f"transactions#{tag}")].root == root.id


def test_a_realizations_own_pin_is_left_as_it_was() -> None:
    """Old pins (named for the realization, some with no max ref age at all) get no ref-age upkeep and no new name."""
    mh = "ef" * 32
    own = "fraud_training_set-v6-0123456789abcdef0123"
    doc = {"partitions": [], "sources": [{"table": "transactions", "snapshot_id": "1", "tag": own}]}
    inv = Inventory(
        observed_at=NOW, watermark={}, realizations=[], manifests={mh: doc},
        snapshots=[SnapshotInfo("transactions", 1, SNAP_AT, False)], tags=[TagInfo("transactions", own, 1, None)],
        roots=[RootSpec("9", "legal_hold", f"realization:{mh}", "hold", "legal")],
    )  # fmt: skip
    plan = plan_gc(inv, POLICY)
    assert _tag(plan, own) == (True, "reachable from a root", None, "") and not plan.upkeep()
