"""The project stands alone: no docstring, doc or README cites a design document that is not in the repository (issue 28 item 5)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile(r"\b(?:ARCHITECTURE|CANONICAL-ENCODING|STYLE|PEERS)\.md\b|\.\./shared")


def test_nothing_cites_the_design_documents_outside_the_repository() -> None:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "dsv_platform").rglob("*.py"), *(ROOT / "dsv_platform").rglob("*.c")]
    cited = [f"{p.relative_to(ROOT)}:{n}" for p in files for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert cited == [], "cite docs/<page>.md instead: " + ", ".join(cited)
