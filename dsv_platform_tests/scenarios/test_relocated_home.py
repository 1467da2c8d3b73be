"""Issue 25 item 8: a moved home reads where it is now, and a copy, once relocated, is its own home; the original is untouched.

A small fraud world with two published realizations is built once. ``mv`` of a copy of it is relocated on first
open; a ``cp -a`` copy is refused (exit 18, naming ``dsv home relocate``) until ``dsv home relocate``. Then, in the
new place: ``dsv verify`` of every realization (objects, content hash and every pinned data file's recorded digest),
``dsv resolve``, a rebuild from the same pins, ``open_dataset``, an ingest and a build; the original's bytes are
unchanged throughout.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.bootstrap import build_platform
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES, TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.scenarios.support import World

pytestmark = pytest.mark.slow  # two small worlds built, relocated, verified, ingested into and rebuilt: about 10 s each


def _fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder``: its SHA-256 and mtime (what a write into it would change)."""
    return {str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _verified(dsv: DsvCli, ref: str) -> None:
    """``dsv verify`` passes: objects, content hash, signature, and every pinned canonical data file against its recorded digest."""
    result = dsv("verify", ref, "--json")
    assert result.code == 0, result.out + result.err
    document = json.loads(result.out)
    assert document["ok"] and document["data_files"]["files"] > 0 and document["data_files"]["unverified"] == [], document


@pytest.fixture
def made(tmp_path: Path) -> tuple[Path, list[str]]:
    home = tmp_path / "made"
    world = World.create(home, rows_per_day=30, days=3)
    refs = [world.build("v5").ref, world.build("v6").ref]
    world.platform.registry.close()
    return home, refs


@pytest.mark.parametrize("how", ["mv", "cp -a"])
def test_a_moved_or_copied_home_is_its_own_after_relocation(made, tmp_path, how, capsys, monkeypatch):
    original, refs = made
    before = _fingerprint(original)
    subprocess.run([*how.split(), str(original), str(tmp_path / "moved")], check=True)
    moved = tmp_path / "moved"
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(moved)})
    if how == "cp -a":
        refused = dsv("verify", refs[0])
        assert refused.code == 18 and refused.err.count("\n") == 1 and "dsv home relocate" in refused.err
        assert str(original / "warehouse") in refused.err and str(moved / "warehouse") in refused.err
        relocated = dsv("home", "relocate")
        assert relocated.code == 0 and "5 table(s) relocated" in relocated.out, relocated.out + relocated.err
    for ref in refs:
        _verified(dsv, ref)
        assert dsv("resolve", ref).code == 0
    assert dsv("home", "relocate").out.endswith("every table already lives here\n")

    p = build_platform(settings_at(moved))
    assert str(moved / "warehouse") in p.tables.load(TRANSACTIONS.name).location()
    with open_dataset(refs[1], settings=p.settings) as ds:
        assert ds.to_arrow().num_rows == 90
    world = World(p.settings, FraudDomain(rows_per_day=30), p.landing, p.tables, p.registry, p.objects, p)
    assert world.build("v6").ref == refs[1], "rebuilt from the same pins: the same realization"
    world.ingest([daily_batch(world.domain, s, d) for d in world.domain.days(4)[3:] for s in SOURCES])
    later = [world.build("v5").ref, world.build("v6").ref]
    assert not set(later) & set(refs), "the new day gives new realizations"
    p.registry.close()
    if how == "mv":  # moved again: digests recorded at both former places still verify
        subprocess.run(["mv", str(moved), str(tmp_path / "again")], check=True)
        dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "again")})
    for ref in refs + later:
        _verified(dsv, ref)
    if how == "cp -a":
        assert _fingerprint(original) == before, "nothing was written into the original home"
        assert DsvCli(capsys, monkeypatch, {"DSV_HOME": str(original)})("verify", refs[1]).code == 0, "the original still reads where it was made"
