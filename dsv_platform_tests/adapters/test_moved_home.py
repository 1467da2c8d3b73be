"""Issue 25 item 8: a moved home is relocated when it is opened; a copy is refused with one line naming both places and
``dsv home relocate``, and never writes into the original. The whole story (verify, ingest, build): scenarios/test_relocated_home.py."""

from __future__ import annotations

import subprocess

import pytest

from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_catalog, relocate_home
from dsv_platform.bootstrap import build_tables
from dsv_platform.core.errors import EnvironmentSetupError
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.scenarios.support import World


def _snapshot(folder):
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file())


def _history(tables):
    tbl = tables.load(TRANSACTIONS.name)
    snapshots = [(s.snapshot_id, s.parent_snapshot_id, s.sequence_number, s.summary.model_dump_json() if s.summary else None) for s in tbl.snapshots()]
    return snapshots, dict(tbl.refs())


def test_a_moved_home_is_relocated_on_open_keeping_snapshots_and_tags(tmp_path):
    world = World.create(tmp_path / "made", rows_per_day=10, days=2)
    tbl = world.tables.load(TRANSACTIONS.name)
    tbl.manage_snapshots().create_tag(tbl.current_snapshot().snapshot_id, "pin").commit()
    rows, history = world.tables.read(TRANSACTIONS).num_rows, _history(world.tables)
    world.platform.registry.close()
    subprocess.run(["mv", str(tmp_path / "made"), str(tmp_path / "elsewhere")], check=True)
    tables = build_tables(settings_at(tmp_path / "elsewhere"))
    assert tables.read(TRANSACTIONS).num_rows == rows and _history(tables) == history
    tbl = tables.load(TRANSACTIONS.name)
    assert tbl.location().startswith((tmp_path / "elsewhere" / "warehouse").as_uri())
    paths = [t.file.file_path for t in tbl.scan(snapshot_id=tbl.refs()["pin"].snapshot_id).plan_files()]
    assert paths and all(p.startswith((tmp_path / "elsewhere").as_uri() + "/") for p in paths)
    assert relocate_catalog(settings_at(tmp_path / "elsewhere").iceberg_catalog_url, str(tmp_path / "elsewhere" / "warehouse")) == []


def test_a_copied_home_is_refused_naming_both_places_and_the_fix(tmp_path):
    world = World.create(tmp_path / "made", rows_per_day=10, days=2)
    rows = world.tables.read(TRANSACTIONS).num_rows
    world.platform.registry.close()
    World.create(tmp_path / "made" / "semantic-demo", rows_per_day=10, days=1).platform.registry.close()  # a scratch home inside
    subprocess.run(["cp", "-a", str(tmp_path / "made"), str(tmp_path / "elsewhere")], check=True)
    original = _snapshot(tmp_path / "made")
    with pytest.raises(EnvironmentSetupError) as info:
        build_tables(settings_at(tmp_path / "elsewhere"))
    message = str(info.value)
    assert "\n" not in message and "moved or copied" in message and "dsv home relocate" in message
    assert str(tmp_path / "elsewhere" / "warehouse") in message and str(tmp_path / "made" / "warehouse") in message
    assert _snapshot(tmp_path / "made") == original  # nothing written into the original's warehouse
    assert len(relocate_home(tmp_path / "elsewhere")) == 10  # the fix the line names: both homes' five tables
    assert build_tables(settings_at(tmp_path / "elsewhere")).read(TRANSACTIONS).num_rows == rows
    assert build_tables(settings_at(tmp_path / "elsewhere" / "semantic-demo")).read(TRANSACTIONS).num_rows == 10
    assert _snapshot(tmp_path / "made") == original
    assert build_tables(settings_at(tmp_path / "made")).read(TRANSACTIONS).num_rows == rows  # the original still reads


def test_two_processes_opening_a_moved_home_at_once_both_read(tmp_path):
    """Whichever relocation commits first wins; the other commits nothing and reads the winner's metadata."""
    import sys

    world = World.create(tmp_path / "made", rows_per_day=10, days=2)
    rows = world.tables.read(TRANSACTIONS).num_rows
    world.platform.registry.close()
    subprocess.run(["mv", str(tmp_path / "made"), str(tmp_path / "elsewhere")], check=True)
    code = (
        "import sys; from pathlib import Path; from dsv_platform.bootstrap import build_tables; "
        "from dsv_platform.examples.fraud.specs import TRANSACTIONS; from dsv_platform.settings import load_settings; "
        "print(build_tables(load_settings({}).with_home(Path(sys.argv[1]))).read(TRANSACTIONS).num_rows)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "elsewhere")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert [int(out.split()[-1]) for out, _ in results] == [rows, rows]
    assert build_tables(settings_at(tmp_path / "elsewhere")).read(TRANSACTIONS).num_rows == rows
