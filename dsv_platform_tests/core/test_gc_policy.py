"""Issue 28 item 2: one validated GC policy, read from platform.yaml (``gc:``), used by the CLI, the Dagster job and the scan.

Before: the 24 h safety window was written in four places (the CLI flag, the Dagster op config, the
integrity scan and the policy value), one of them unvalidated.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from dsv_platform.core.config.platform_options import parse_options
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.retention.policy import DEFAULT_SAFETY_WINDOW, GcPolicy, GcPolicyError
from dsv_platform.defs.gc import GcConfig
from dsv_platform.settings import DEFAULT_CONFIG_DIR
from dsv_platform_tests.fixtures.cli_runner import DsvCli


def test_the_policy_comes_from_platform_yaml_with_defaults(tmp_path: Path) -> None:
    file = tmp_path / "platform.yaml"
    assert parse_options({}, file=file).gc == GcPolicy() and GcPolicy().safety_window == DEFAULT_SAFETY_WINDOW == timedelta(hours=24)
    assert parse_options({"gc": {"safety_window_hours": 6, "keep_heads": False}}, file=file).gc == GcPolicy(timedelta(hours=6), False)
    assert GcConfig().safety_window_hours is None, "the job's default is the configuration's policy, not a second 24"


@pytest.mark.parametrize(("doc", "key"), [({"safety_window_hours": -1}, "gc.safety_window_hours"), ({"safety_window_hours": "1d"}, "gc.safety_window_hours"),
                                          ({"safety_window_hours": float("inf")}, "gc.safety_window_hours"), ({"keep_heads": "yes"}, "gc.keep_heads"),
                                          ({"window": 3}, "gc")])  # fmt: skip
def test_a_bad_policy_is_refused_naming_the_file_and_key(tmp_path: Path, doc: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as refused:
        parse_options({"gc": doc}, file=tmp_path / "platform.yaml")
    assert "platform.yaml" in str(refused.value)


def test_overrides_go_through_the_same_validation() -> None:
    assert GcPolicy().with_hours(0).safety_window == timedelta(0)
    assert GcPolicy().with_hours(None) == GcPolicy()
    with pytest.raises(GcPolicyError, match="--safety-window-hours -2"):
        GcPolicy().with_hours(-2, where="--safety-window-hours")
    with pytest.raises(GcPolicyError):
        GcPolicy(safety_window=timedelta(hours=-1))


def test_dsv_gc_plan_uses_the_configured_window_unless_overridden(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config"
    shutil.copytree(DEFAULT_CONFIG_DIR, config)
    (config / "platform.yaml").write_text((config / "platform.yaml").read_text() + "gc: {safety_window_hours: 6}\n")
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(config)})
    planned = dsv("gc", "plan", "--json")
    assert planned.code == 0, planned.err
    assert json.loads(planned.out)["safety_window_s"] == 6 * 3600
    overridden = dsv("gc", "plan", "--json", "--safety-window-hours", "1")
    assert json.loads(overridden.out)["safety_window_s"] == 3600
    refused = dsv("gc", "plan", "--safety-window-hours", "-1")
    assert refused.code != 0 and "--safety-window-hours -1.0: must be a finite number of hours >= 0" in refused.err
