"""The memory-cap fixture never turns a missing cgroup into a silent pass in CI: there it fails, elsewhere it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform_tests.fixtures import memory_cap


@pytest.fixture
def no_cgroups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine with neither a v1 memory controller nor a v2 hierarchy."""
    monkeypatch.setattr(memory_cap, "V1", tmp_path / "v1-memory")
    monkeypatch.setattr(memory_cap, "V2", tmp_path / "v2")


@pytest.mark.parametrize("value", ["true", "1"])
def test_in_ci_a_missing_memory_cgroup_fails_the_test(no_cgroups: None, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as raised:  # a skip here would pass unseen
        memory_cap.run_capped(["true"], 64 << 20, env={})
    assert raised.type is pytest.fail.Exception and "CI: no memory cgroup controller" in str(raised.value)


def test_on_a_developer_machine_a_missing_memory_cgroup_skips(no_cgroups: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no memory cgroup controller"):
        memory_cap.run_capped(["true"], 64 << 20, env={})
