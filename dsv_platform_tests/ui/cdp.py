"""A tiny Chrome DevTools Protocol client: start headless Chromium, navigate, poll the rendered text, screenshot.

Only what the UI tests need, over the synchronous client of ``websockets`` (a Dagster dependency).
Every wait is bounded; :meth:`Browser.close` ends the browser process it started.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MISSING = (
    "Chromium is not installed (no /usr/bin/chromium): .ci/run installs it (apt-get install -y chromium); "
    "on a dev machine run `apt-get update && apt-get install -y chromium`, or point DSV_CHROMIUM at a Chromium/Chrome binary"
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


def find_chromium() -> str | None:
    """The browser binary: $DSV_CHROMIUM, else the first of the usual names on PATH."""
    explicit = os.environ.get("DSV_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class CdpError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page, driven over CDP."""

    def __init__(self, binary: str, *, width: int = 1600, height: int = 1000, start_timeout: float = 30.0) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="dsv-chromium-"))
        self.log = (self.profile.parent / f"{self.profile.name}.log").open("w+b")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self.ws: ClientConnection | None = None
        self._closing = contextlib.ExitStack()
        try:
            port = self._devtools_port(start_timeout)
            self.ws = self._closing.enter_context(connect(self._page_ws_url(port, start_timeout), max_size=None, open_timeout=start_timeout))
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.resize(width, height)
        except BaseException:
            self.close()
            raise

    # -- start-up -------------------------------------------------------------------------------
    def _devtools_port(self, timeout: float) -> int:
        """Chromium writes the port it chose (``--remote-debugging-port=0``) to DevToolsActivePort in the profile."""
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CdpError(f"Chromium exited with {self.proc.returncode} at start-up:\n{self.output()}")
            try:
                first = marker.read_text().splitlines()[0]
                return int(first)
            except (FileNotFoundError, IndexError, ValueError):
                time.sleep(0.1)
        raise CdpError(f"Chromium did not open its DevTools port within {timeout:.0f} s:\n{self.output()}")

    def _page_ws_url(self, port: int, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            time.sleep(0.1)
        raise CdpError(f"no page target on the DevTools port within {timeout:.0f} s")

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    # -- protocol -------------------------------------------------------------------------------
    def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one command and wait (bounded) for its reply; events arriving meanwhile are dropped."""
        assert self.ws is not None
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"{method}: no reply within {timeout:.0f} s")
            try:
                reply = json.loads(self.ws.recv(timeout=left))
            except TimeoutError:
                continue
            if reply.get("id") != msg_id:
                continue
            if "error" in reply:
                raise CdpError(f"{method}: {reply['error']}")
            return dict(reply.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise CdpError(f"evaluate {expression!r}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    # -- what the tests use ---------------------------------------------------------------------
    def navigate(self, url: str) -> None:
        reply = self.call("Page.navigate", url=url)
        if reply.get("errorText"):
            raise CdpError(f"navigate {url}: {reply['errorText']}")

    def resize(self, width: int, height: int) -> None:
        """The page's viewport (virtualized lists render only the rows that fit)."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def press(self, key: str, code: str, key_code: int, *, alt: bool = False) -> None:
        """One key press (keyDown + keyUp) on the focused page, optionally with Alt held."""
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, modifiers=1 if alt else 0, key=key, code=code, windowsVirtualKeyCode=key_code)

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def wait_for_text(self, *needles: str, timeout: float = 30.0, poll: float = 0.25) -> str:
        """Poll ``document.body.innerText`` until it contains every needle; the text, or AssertionError naming what is missing."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [n for n in needles if n not in text]
            if not missing:
                return text
            if time.monotonic() >= deadline:
                raise AssertionError(f"after {timeout:.0f} s the page {self.evaluate('location.href')} does not show {missing}; it shows:\n{text[:3000]}")
            time.sleep(poll)

    def click_text(self, text: str, selector: str = "button, a, [role=tab], [role=button]") -> bool:
        """Click the first element matching ``selector`` whose visible text is exactly ``text``."""
        js = (
            f"(() => {{ const el = [...document.querySelectorAll({json.dumps(selector)})]"
            f".find(e => e.innerText && e.innerText.trim() === {json.dumps(text)});"
            " if (!el) return false; el.scrollIntoView(); el.click(); return true; })()"
        )
        return bool(self.evaluate(js))

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._closing.close()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        Path(self.log.name).unlink(missing_ok=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
