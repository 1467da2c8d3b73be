"""requirements.lock (the environment a reproduction rebuilds) agrees with pyproject.toml and with the running venv."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from dsv_platform.services.reproduction.envbuild import lock_pins

ROOT = Path(__file__).resolve().parents[1]
LOCK = (ROOT / "requirements.lock").read_bytes()


def runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def test_lockfile_pins_every_runtime_dependency_within_its_range() -> None:
    pins = lock_pins(LOCK)
    for req in runtime_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is a runtime dependency but requirements.lock does not pin it: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), f"requirements.lock pins {name}=={pins[name]}, pyproject asks {req}: run `make lock`"
    for name in ("matplotlib", "tzdata", "cryptography", "uv"):
        assert name in pins


def test_lockfile_requires_hashes_for_every_pin() -> None:
    blocks = re.split(r"\n(?=[A-Za-z0-9])", LOCK.decode().split("\n", 2)[2].strip())
    assert len(blocks) == len(lock_pins(LOCK)) > 50
    for block in blocks:
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), f"no hash for {block.splitlines()[0]}"


def test_lockfile_is_what_this_venv_runs() -> None:
    """`make venv` installs the lock first, so every locked package is installed at its locked version."""
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
    differs = {n: (v, installed.get(n)) for n, v in lock_pins(LOCK).items() if installed.get(n) != v}
    assert differs == {}, f"installed versions differ from requirements.lock (locked, installed): {differs}; run `make venv`"
