"""``model_governance:`` in platform.yaml (core/config/model_governance.py): the policies, the fail-closed default, bad values."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from dsv_platform.core.config.model_governance import DEFAULT_POLICY, FamilyPolicy, ModelPolicy, obligation_state
from dsv_platform.core.config.platform_options import parse_options
from dsv_platform.core.config_yaml import ConfigError

FILE = Path("/cfg/platform.yaml")


def test_policies_per_family_and_the_fail_closed_default() -> None:
    doc = {"model_governance": {"families": {"fraud_model": {"continue_until_retrain": "30d"}, "churn": "stop_serving", "ranker": "retrain_required"}}}
    governance = parse_options(doc, file=FILE).model_governance
    assert governance.policy_for("fraud_model") == (FamilyPolicy(ModelPolicy.CONTINUE_UNTIL_RETRAIN, 30), "model_governance.families.fraud_model")
    assert governance.policy_for("churn")[0].policy is ModelPolicy.STOP_SERVING
    policy, source = governance.policy_for("undeclared")
    assert policy == DEFAULT_POLICY and policy.policy is ModelPolicy.RETRAIN_REQUIRED and source.startswith("built-in default")
    assert parse_options(None, file=FILE).model_governance.policy_for(None)[0] is DEFAULT_POLICY  # no platform.yaml: fail closed
    stated = parse_options({"model_governance": {"default": "stop_serving"}}, file=FILE).model_governance
    assert stated.policy_for("x") == (FamilyPolicy(ModelPolicy.STOP_SERVING), "model_governance.default")


def test_deadline_and_overdue() -> None:
    opened = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    due = FamilyPolicy(ModelPolicy.CONTINUE_UNTIL_RETRAIN, 30).due_at(opened)
    assert due == opened + dt.timedelta(days=30) and FamilyPolicy(ModelPolicy.RETRAIN_REQUIRED).due_at(opened) is None
    assert obligation_state(closed=False, due_at=due, now=due - dt.timedelta(seconds=1)) == "open"
    assert obligation_state(closed=False, due_at=due, now=due) == "overdue"
    assert obligation_state(closed=True, due_at=due, now=due + dt.timedelta(days=1)) == "closed"
    assert obligation_state(closed=False, due_at=None, now=due + dt.timedelta(days=999)) == "open"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ({"families": {"m": "continue_until_retrain"}}, "model_governance.families.m", "'continue_until_retrain' needs its grace period"),
        ({"families": {"m": {"continue_until_retrain": 30}}}, "model_governance.families.m.continue_until_retrain", "got 30"),
        ({"families": {"m": {"continue_until_retrain": "0d"}}}, "model_governance.families.m.continue_until_retrain", "got '0d'"),
        ({"families": {"m": {"continue_until_retrain": "30d", "x": 1}}}, "model_governance.families.m", "got {"),
        ({"families": {"m": "keep_serving"}}, "model_governance.families.m", "got 'keep_serving'"),
        ({"families": {"bad name": "stop_serving"}}, "model_governance.families.bad name", "got 'bad name'"),
        ({"families": ["m"]}, "model_governance.families", "got ['m']"),
        ({"default": "forever"}, "model_governance.default", "got 'forever'"),
        ({"grace": "30d"}, "model_governance.grace", "unknown key"),
    ],
)
def test_a_bad_value_names_file_key_and_value(section: object, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_options({"model_governance": section}, file=FILE)
    assert str(caught.value).startswith(f"{FILE}: key {key!r}: ") and value in str(caught.value), caught.value
