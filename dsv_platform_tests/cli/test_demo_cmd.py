"""`dsv demo` on the embedded default: layout-independent identity, one leaf moves per edit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def test_demo_prints_stable_identities(tmp_path: Path) -> None:
    env = {**os.environ, "DSV_HOME": str(tmp_path / "home")}
    dsv = Path(sys.executable).with_name("dsv")
    result = subprocess.run([str(dsv), "demo", "--days", "4"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    hashes = re.findall(r"content hash ([0-9a-f]{64})", result.stdout)
    assert len(hashes) == 3
    assert hashes[0] == hashes[1] != hashes[2]
    assert "(SAME)" in result.stdout
    assert re.search(r"partition leaves that moved: \['event_date=2026-06-0\d'\]", result.stdout)
