"""The layer arrows point down (STYLE.md): core <- adapters <- defs / cli; settings reads the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dsv_platform"
FORBIDDEN = {
    "core": {"dagster", "pyiceberg", "boto3", "botocore", "sqlalchemy", "dsv_platform.adapters", "dsv_platform.defs", "dsv_platform.cli"},
    "adapters": {"dagster", "dsv_platform.defs", "dsv_platform.cli"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _violations(layer: str) -> list[str]:
    bad = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, module in _imports(path):
            if any(module == f or module.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_only_downwards(layer: str) -> None:
    assert _violations(layer) == []


def test_layers_check_detects_a_violation(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import sqlalchemy\nfrom dagster import asset\n")
    assert [m for _, m in _imports(probe)] == ["sqlalchemy", "dagster"]


def test_layers_only_settings_reads_the_environment() -> None:
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "settings.py" and path.parent == PACKAGE:
            continue
        text = path.read_text(encoding="utf-8")
        if "os.environ" in text or "os.getenv" in text or "getenv(" in text:
            readers.append(str(path.relative_to(PACKAGE.parent)))
    assert readers == []
