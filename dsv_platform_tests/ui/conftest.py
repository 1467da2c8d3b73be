"""The UI tests share one seeded instance, one Dagster UI (daemon and webserver) and one browser; each test gets its own page.

Chromium is a system package (``make prereqs``); without it the tests fail, never skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from dsv_platform_tests.ui.harness import CHROMIUM, CHROMIUM_ARGS, MISSING, dagster_ui, seed
from dsv_platform_tests.ui.steps import NO_POPUP, Steps


@pytest.fixture(scope="package")
def ui_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("ui") / "home"
    seed(home)
    return home


@pytest.fixture(scope="package")
def ui_base(ui_home: Path) -> Iterator[str]:
    """The base URL of the Dagster UI (``make ui``) on the seeded instance; the servers' logs are next to the home."""
    with dagster_ui(ui_home, ui_home.parent / "logs") as base:
        yield base


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(MISSING, pytrace=False)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def steps(browser: Browser, ui_base: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Steps]:
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.add_init_script(NO_POPUP)
    try:
        yield Steps(context.new_page(), ui_base, tmp_path / "screenshots", request.node.name)
    finally:
        context.close()
