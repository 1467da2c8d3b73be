"""Issue 25 item 8: a moved or copied home is refused with one line naming both places; a copy never writes into the original."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from dsv_platform.bootstrap import build_tables
from dsv_platform.core.errors import EnvironmentSetupError
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.support import World


def _snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("how", ["mv", "cp -a"])
def test_a_moved_or_copied_home_is_refused_naming_both_places(tmp_path, how):
    world = World.create(tmp_path / "made", rows_per_day=10, days=2)
    rows = world.tables.read(TRANSACTIONS).num_rows
    world.platform.registry.close()
    subprocess.run([*how.split(), str(tmp_path / "made"), str(tmp_path / "elsewhere")], check=True)
    original = _snapshot(tmp_path / "made") if how == "cp -a" else None
    with pytest.raises(EnvironmentSetupError) as info:
        build_tables(settings_at(tmp_path / "elsewhere"))
    message = str(info.value)
    assert "\n" not in message and "moved or copied" in message
    assert str(tmp_path / "elsewhere" / "warehouse") in message and str(tmp_path / "made" / "warehouse") in message
    if how == "cp -a":
        assert _snapshot(tmp_path / "made") == original  # nothing written into the original's warehouse
        assert build_tables(settings_at(tmp_path / "made")).read(TRANSACTIONS).num_rows == rows  # the original still reads
    else:
        shutil.move(tmp_path / "elsewhere", tmp_path / "made")  # moved back: it reads again
        assert build_tables(settings_at(tmp_path / "made")).read(TRANSACTIONS).num_rows == rows
