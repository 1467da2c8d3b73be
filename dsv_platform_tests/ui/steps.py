"""A user's steps in the Dagster UI: open a page, wait (bounded) for the text it must show, one screenshot per step.

Screenshots go to the test's ``tmp_path/screenshots`` and are copied to ``.pytest-artifacts/ui/<test>/`` (ignored
by git) so they outlive the temporary folder; a failed wait leaves a ``FAILED-<step>.png`` beside them.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, expect

from dsv_platform_tests.ui.harness import REPO

ARTEFACTS = REPO / ".pytest-artifacts" / "ui"
# Only on the page's own origin: pre-dismiss the community pop-up, it would cover the graph.
NO_POPUP = "try { localStorage.setItem('communityNux', JSON.stringify('1')) } catch (e) {}"


class Steps:
    """One browser page of one test, on the Dagster UI at ``base``."""

    def __init__(self, page: Page, base: str, shots: Path, test: str) -> None:
        self.page, self.base, self.shots = page, base, shots
        self.kept = ARTEFACTS / re.sub(r"[^\w.-]+", "_", test)
        shutil.rmtree(self.kept, ignore_errors=True)
        self.shots.mkdir(parents=True, exist_ok=True)
        self.kept.mkdir(parents=True, exist_ok=True)
        self.taken: list[Path] = []

    def open(self, path: str, *needles: str, shot: str, timeout: float = 45.0) -> str:
        self.page.goto(self.base + path)
        return self.wait(*needles, shot=shot, timeout=timeout)

    def wait(self, *needles: str, shot: str, timeout: float = 45.0, settle: float = 0.5) -> str:
        """Wait until the rendered text shows every needle, screenshot the step, return the rendered text."""
        body = self.page.locator("body")
        try:
            for needle in needles:
                expect(body).to_contain_text(needle, use_inner_text=True, timeout=timeout * 1000)
        except AssertionError:
            self.screenshot(f"FAILED-{shot}")
            raise
        time.sleep(settle)  # let the layout, fonts and status colours settle before the picture
        self.taken.append(self.screenshot(shot))
        return self.text()

    def text(self) -> str:
        return self.page.inner_text("body")

    def button(self, label: str) -> Locator:
        """The button whose visible text is exactly ``label`` (an icon's aria-label is not part of it)."""
        return self.page.locator("button").filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{len(self.taken) + 1:02d}-{name}.png"
        try:
            self.page.screenshot(path=str(path))
        except PlaywrightError:  # a failed step's picture must not hide the failure itself
            return path
        shutil.copy2(path, self.kept / path.name)
        return path

    def assert_screenshots(self) -> None:
        """Every step left a real picture (a blank page compresses to a few kB)."""
        assert self.taken, "no step was photographed"
        assert all(p.stat().st_size > 10_000 for p in self.taken), [(p.name, p.stat().st_size) for p in self.taken]
