"""Pins of what produced a result: the producer's own git checkout, its lockfile, its import path.

The code pin is taken from the repository holding the producer's (or
trainer's) module file, not from the dataset it read; the lockfile hash is of
``requirements.lock`` in that repository at the pinned commit.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.reproduction.build_pin import read_build_pin

LOCKFILE = "requirements.lock"
UNKNOWN = "unknown"


def _git(repo: Path, *args: str, timeout: int = 30) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(repo), *args], capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


PACKAGE_DIR = Path(__file__).resolve().parents[2]
"""The installed dsv_platform package (in an image: site-packages/dsv_platform, with no .git around it)."""


def _in_package(folder: Path) -> bool:
    return folder.resolve().is_relative_to(PACKAGE_DIR)


def module_file(obj: Any) -> Path:
    """The source file of the module defining ``obj`` (a function, or an object by its class's module)."""
    module = sys.modules.get(getattr(obj, "__module__", "") or type(obj).__module__)
    path = getattr(module, "__file__", None)
    if not path:
        raise ConfigurationError(f"cannot tell which file defines {obj!r}: its module has no __file__")
    return Path(path).resolve()


def import_path(obj: Any) -> str:
    """``module:ATTRIBUTE`` under which ``obj`` is a module-level object (what a later reproduction imports)."""
    module_name = getattr(obj, "__module__", None) or type(obj).__module__
    module = sys.modules.get(module_name)
    qualname = getattr(obj, "__qualname__", "")
    if module is not None and qualname and getattr(module, qualname, None) is obj:
        return f"{module_name}:{qualname}"
    for attr, value in vars(module).items() if module is not None else ():
        if value is obj and not attr.startswith("_"):
            return f"{module_name}:{attr}"
    raise ConfigurationError(f"{obj!r} must be a module-level object of {module_name} (it is recorded by import path, module:ATTRIBUTE)")


def checkout_of(path: Path) -> dict[str, Any]:
    """``{"repo", "commit", "dirty"}`` of the git checkout holding ``path`` (read now, never cached); commit ``unknown`` outside git."""
    folder = path if path.is_dir() else path.parent
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        baked = read_build_pin() if _in_package(folder) else None  # an image: the commit baked in at build time
        if baked is not None:
            return {"repo": str(PACKAGE_DIR), "commit": baked.commit, "dirty": baked.dirty}
        return {"repo": str(folder), "commit": UNKNOWN, "dirty": False}
    repo = Path(top.stdout.decode().strip())
    head = _git(repo, "rev-parse", "HEAD")
    status = _git(repo, "status", "--porcelain")
    if head is None or head.returncode != 0 or status is None:
        return {"repo": str(repo), "commit": UNKNOWN, "dirty": False}
    return {"repo": str(repo), "commit": head.stdout.decode().strip(), "dirty": bool(status.stdout.strip())}


def lockfile_sha256(repo: str, commit: str) -> str:
    """SHA-256 of ``requirements.lock`` in ``repo`` at ``commit`` (the working copy outside git); ``unknown`` when absent."""
    baked = read_build_pin()
    if baked is not None and commit == baked.commit and repo == str(PACKAGE_DIR) and baked.lock_sha256:
        return baked.lock_sha256  # the image's lock, hashed at build time
    if commit == UNKNOWN:
        lock = Path(repo) / LOCKFILE
        return hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else UNKNOWN
    shown = _git(Path(repo), "show", f"{commit}:{LOCKFILE}")
    if shown is None or shown.returncode != 0:
        return UNKNOWN
    return hashlib.sha256(shown.stdout).hexdigest()


__all__ = ["LOCKFILE", "UNKNOWN", "checkout_of", "import_path", "lockfile_sha256", "module_file"]
