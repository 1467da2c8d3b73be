"""The commit an image was built from, baked in at build time (deploy/Dockerfile): the code pin where no ``.git`` exists.

``dsv_platform/build_pin.json``: ``{"commit": <40 hex>, "dirty": bool, "lock_sha256": <64 hex>}``, written by
``docker build --build-arg DSV_COMMIT=$(git rev-parse HEAD) --build-arg DSV_DIRTY=...`` before the package is
installed. A checkout (git) always wins; a run inside the image records this pin, so ``dsv reproduce`` can restore it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

BUILD_PIN_FILE = "build_pin.json"
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class BuildPin:
    commit: str
    dirty: bool
    lock_sha256: str | None


def read_build_pin(package: str = "dsv_platform") -> BuildPin | None:
    """The pin baked into the installed package, or None (not an image build, or a malformed file: never a guessed commit)."""
    try:
        text = resources.files(package).joinpath(BUILD_PIN_FILE).read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, ValueError, ModuleNotFoundError):
        return None
    commit, dirty, lock = doc.get("commit"), doc.get("dirty"), doc.get("lock_sha256")
    if not isinstance(commit, str) or not _COMMIT.match(commit) or not isinstance(dirty, bool):
        return None
    return BuildPin(commit, dirty, lock if isinstance(lock, str) and _SHA256.match(lock) else None)


__all__ = ["BUILD_PIN_FILE", "BuildPin", "read_build_pin"]
