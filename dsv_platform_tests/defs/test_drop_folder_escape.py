"""Issue 11 item 10: the drop-folder sensor and the raw asset's file config never land a path that resolves outside the drop folder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.defs.raw import RawBatchConfig, batch_files, outside_reason
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import DEFAULT_CONFIG_DIR
from dsv_platform_tests.defs.support import ROWS_PER_DAY, Env, dagster_env, drop

DOMAIN = FraudDomain(rows_per_day=ROWS_PER_DAY)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    with dagster_env(tmp_path, monkeypatch) as e:
        yield e


def _outside_batch(tmp_path: Path) -> tuple[Path, str]:
    """A valid batch file outside the drop folder, and its drop-folder name."""
    outside = tmp_path / "elsewhere"
    [name] = drop(outside, [events.daily_batch(DOMAIN, "transactions", DOMAIN.start)])
    return outside / name, name


def test_sensor_skips_a_symlink_out_of_the_drop_folder_with_a_logged_reason(env: Env, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    settings, defs, instance = env
    target, name = _outside_batch(tmp_path)
    settings.drop_folder.mkdir(parents=True, exist_ok=True)
    (settings.drop_folder / name).symlink_to(target)
    sensor = defs.resolve_sensor_def("drop_folder_sensor")
    with dg.build_sensor_context(instance=instance, resources={"platform": defs.resources["platform"]}) as ctx:
        result = sensor(ctx)
    assert isinstance(result, dg.SensorResult) and isinstance(result.cursor, str)
    assert result.run_requests == []
    logged = capfd.readouterr().err
    assert "skipped, never landed" in logged and "outside the drop folder" in logged and name in logged
    assert "outside the drop folder" in json.loads(result.cursor)[name]  # logged once, not every tick


def test_raw_config_refuses_dotdot_and_symlinks_out(tmp_path: Path) -> None:
    folder = tmp_path / "drop"
    folder.mkdir()
    target, name = _outside_batch(tmp_path)
    (folder / name).symlink_to(target)
    source = load_config(DEFAULT_CONFIG_DIR).sources["transactions"]
    days = [DOMAIN.start]
    for files in ([f"../elsewhere/{name}"], [name]):
        with pytest.raises(ConfigurationError, match="outside the drop folder"):
            batch_files(source, RawBatchConfig(files=files), folder, days)
    skipped: list[str] = []
    assert batch_files(source, RawBatchConfig(), folder, days, skipped) == []
    assert len(skipped) == 1 and name in skipped[0]
    (folder / "inside.csv").write_text("x")
    assert outside_reason(folder / "inside.csv", folder) is None
    reason = outside_reason(folder / ".." / "elsewhere" / name, folder)
    assert reason is not None and reason.endswith(f"outside the drop folder {folder.resolve()}")
    assert str((folder.parent / "elsewhere" / name).resolve()) in reason


def test_raw_asset_run_with_an_escaping_name_lands_nothing(env: Env, tmp_path: Path) -> None:
    settings, defs, instance = env
    _, name = _outside_batch(tmp_path)
    settings.drop_folder.mkdir(parents=True, exist_ok=True)
    bad = str(Path("..") / ".." / "elsewhere" / name)
    result = dg.materialize(
        list(defs.assets or []),
        selection="raw/transactions",
        partition_key=DOMAIN.start.isoformat(),
        instance=instance,
        resources=defs.resources,
        run_config={"ops": {"raw__transactions": {"config": {"files": [bad]}}}},
        raise_on_error=False,
    )
    assert not result.success
    with build_platform(settings) as platform:
        landing = platform.existing_landing()
        assert landing is None or landing.records("transactions", DOMAIN.start) == []
