"""Bake the code pin into the package before the image installs it (deploy/Dockerfile): the image has no ``.git``.

    python deploy/bake_pin.py PACKAGE_DIR LOCKFILE COMMIT DIRTY

Writes ``PACKAGE_DIR/build_pin.json`` (``{"commit", "dirty", "lock_sha256"}``, read by
dsv_platform/core/reproduction/build_pin.py), so a run inside the image records the commit it was built from, its
dirty flag and the SHA-256 of the lock it was installed from, which ``dsv reproduce`` restores. COMMIT is
``$(git rev-parse HEAD)`` (40 hex digits); DIRTY is ``true`` or ``false``. COMMIT ``unknown`` (the build arg left
unset) bakes nothing and says so: runs then record commit ``unknown``, which ``dsv reproduce`` refuses. Anything
else fails the build, naming the value, so an image never carries a guessed pin. Standard library only: it runs
before the package's dependencies are installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

PIN_FILE = "build_pin.json"
_COMMIT = re.compile(r"[0-9a-f]{40}\Z")


def bake(package_dir: Path, lockfile: Path, commit: str, dirty: str) -> dict[str, object] | None:
    """The pin written to ``package_dir/build_pin.json``, or None for commit ``unknown``; bad input is a SystemExit naming it."""
    if commit == "unknown":
        (package_dir / PIN_FILE).unlink(missing_ok=True)  # never a pin copied in from the build context
        print("bake_pin: no DSV_COMMIT build arg: runs in this image record commit unknown, which dsv reproduce refuses", file=sys.stderr)
        return None
    if not _COMMIT.match(commit):
        raise SystemExit(f"bake_pin: DSV_COMMIT={commit!r} is not a full commit id (40 lower-case hex digits: git rev-parse HEAD)")
    if dirty not in ("true", "false"):
        raise SystemExit(f"bake_pin: DSV_DIRTY={dirty!r} must be true or false")
    if not lockfile.is_file():
        raise SystemExit(f"bake_pin: {lockfile}: no lockfile to pin")
    if not (package_dir / "__init__.py").is_file():
        raise SystemExit(f"bake_pin: {package_dir}: not the dsv_platform package folder")
    pin: dict[str, object] = {"commit": commit, "dirty": dirty == "true", "lock_sha256": hashlib.sha256(lockfile.read_bytes()).hexdigest()}
    (package_dir / PIN_FILE).write_text(json.dumps(pin, sort_keys=True) + "\n", encoding="utf-8")
    return pin


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    baked = bake(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    if baked is not None:
        print(f"bake_pin: {baked['commit']} dirty={str(baked['dirty']).lower()} lock {baked['lock_sha256']}")
