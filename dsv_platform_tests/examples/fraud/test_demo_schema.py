"""The demo's renamed column: same bytes through the compatibility view, changed meaning, flagged breaking by the schema diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.contracts.schema_diff import ChangeKind
from dsv_platform.examples import fraud
from dsv_platform.examples.fraud import demo_schema

CONFIG = load_config(Path(fraud.__file__).parent / "config")


def test_the_rename_behind_the_compatibility_view_is_a_breaking_rename_with_a_unit_change() -> None:
    diff = demo_schema.rename_diff(CONFIG)
    assert [(c.column, c.kind, c.new) for c in diff.changes][:2] == [
        ("merchant_risk", ChangeKind.RENAME, "merchant_risk_score"),
        ("merchant_risk", ChangeKind.UNIT_CHANGE, "score"),
    ]
    assert diff.verdict == "breaking"
    (reader,) = diff.consumers
    assert reader.name == "fraud_training_set:v6" and "merchant_risk" in reader.columns and reader.verdict == "breaking"
    # the compatibility view still maps the name the source sends to the contract column
    assert CONFIG.sources["transactions"].aliases == {"merchant_risk_score": "merchant_risk"}


def test_report_flags_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo_schema.report_rename(CONFIG) == 0
    out = capsys.readouterr().out
    assert "schema diff of transactions: BREAKING" in out and "merchant_risk: rename merchant_risk -> merchant_risk_score (breaking)" in out
    assert "flagged BREAKING for fraud_training_set:v6" in out
