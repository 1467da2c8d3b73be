"""The slow set's lists name real tests: a module renamed or a test renamed would otherwise move back into the default set unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

from dsv_platform_tests.conftest import SLOW_MODULES, SLOW_TESTS

ROOT = Path(__file__).resolve().parent


def test_every_slow_module_exists() -> None:
    assert [m for m in sorted(SLOW_MODULES) if not (ROOT / m).is_file()] == []


def test_every_slow_test_is_a_test_function_of_its_module() -> None:
    missing = []
    for entry in sorted(SLOW_TESTS):
        module, _, function = entry.partition("::")
        path = ROOT / module
        if not path.is_file() or not re.search(rf"^def {re.escape(function)}\(", path.read_text(encoding="utf-8"), flags=re.M):
            missing.append(entry)
    assert missing == []
