"""The image's extra lock: the packages the ``deploy`` extra adds to requirements.lock, hashed, and nothing else.

    python deploy/deploy_lock.py requirements.lock FULL_LOCK > deploy/requirements-deploy.lock

FULL_LOCK is ``uv pip compile pyproject.toml --extra deploy --generate-hashes -c requirements.lock`` (``make lock``
writes both): every package of requirements.lock pinned as there, plus the extra's. The image installs both files
with ``pip install --require-hashes --no-deps`` (deploy/Dockerfile), so its environment is the lock ``dsv reproduce``
rebuilds, plus the Dagster instance, Celery and Kubernetes packages, none of them re-resolved. A package both files
pin differently is an error: the extra would change the reproducible environment.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)")

HEADER = "# The deploy extra's packages beyond requirements.lock (deploy/deploy_lock.py, written by `make lock`).\n"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """``{normalized name: its whole block}`` (the ``name==version \\`` line and its hash lines) of a hashed lock."""
    blocks: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        found = _PIN.match(line)
        if found:
            name = normalize(found.group(1))
            blocks[name] = line
        elif name is not None and line.startswith((" ", "\t")):
            blocks[name] += line
        else:
            name = None
    return blocks


def version(block: str) -> str:
    found = _PIN.match(block)
    assert found is not None
    return found.group(3)


def deploy_lock(base: str, full: str) -> str:
    """The blocks of ``full`` that ``base`` lacks; a package both pin with other versions or hashes is a SystemExit naming it."""
    have, want = pins(base), pins(full)
    changed = sorted(n for n in have.keys() & want.keys() if have[n].strip() != want[n].strip())
    if changed:
        raise SystemExit(f"the deploy extra changes pins of requirements.lock: {', '.join(changed)} (re-lock with `make lock`)")
    return HEADER + "".join(want[n] for n in sorted(want.keys() - have.keys()))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.stdout.write(deploy_lock(Path(sys.argv[1]).read_text(encoding="utf-8"), Path(sys.argv[2]).read_text(encoding="utf-8")))
