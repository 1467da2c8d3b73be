"""A small world for reproduction tests: realizations built with explicit code and environment pins, one new day each."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.core.publication.manifest import CodePin, EnvironmentPin
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.model import MODEL_NAME, TRAINER
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.publication.realization import REPO, RealizationBuild, build_realization, environment_lockfile
from dsv_platform.services.reproduction.model_run import ModelRun, train_model
from dsv_platform_tests.scenarios.support import SEALED, World, definition

DAYS = 3
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
CLEAN = CodePin(HEAD, False)


@dataclass
class Lab:
    world: World
    days_used: int = DAYS
    builds: list[RealizationBuild] = field(default_factory=list)

    @classmethod
    def create(cls, home: Path) -> Lab:
        return cls(World.create(home, days=DAYS))

    @property
    def settings(self):  # type: ignore[no-untyped-def]
        return self.world.settings

    @property
    def platform(self):  # type: ignore[no-untyped-def]
        return self.world.platform

    def fresh(self, *, code: CodePin = CLEAN, environment: EnvironmentPin | None = None) -> RealizationBuild:
        """Land one more day (new snapshots, so a new realization) and build with the given pins."""
        self.days_used += 1
        day = self.world.domain.days(self.days_used)[-1]
        self.world.ingest([daily_batch(self.world.domain, s, day) for s in SOURCES])
        build = build_realization(self.world.platform, definition("v6"), code=code, environment=environment)
        self.builds.append(build)
        return build

    def model(self, build: RealizationBuild) -> ModelRun:
        m = build.manifest  # the run records the pins this build was given (a model run's own pin is its trainer's checkout)
        # No lock recorded: these pins are fictions over this checkout (HEAD, "clean"), so a full rerun must never restore a worktree
        # of it; it retrains in today's environment. Restoring is tested on a snapshot repository (scenarios/test_reproduce_artifact.py).
        environment = {**(m.environment.to_document() if m.environment else {}), "lockfile_sha256": "unknown"}
        return train_model(self.platform, build.ref, model_name=MODEL_NAME, trainer=TRAINER, seed=42, code=m.code, environment=environment)

    def expire(self, build: RealizationBuild, *, delete_objects: bool = True) -> None:
        r = self.world.registry.find_by_manifest_hash(build.manifest_hash)
        assert r is not None
        self.world.registry.transition(r.id, RealizationState.EXPIRED, reason="collected by tests", actor="tests")
        if delete_objects:  # as GC would: the objects no other realization of the lab names (a shared one deleted makes those corrupt)
            kept = {p.object for b in self.builds if b.manifest_hash != build.manifest_hash for p in b.manifest.partitions}
            for p in build.manifest.partitions:
                if p.object not in kept:
                    self.world.delete_object(p.object)

    def state(self, build: RealizationBuild) -> RealizationState:
        r = self.world.registry.find_by_manifest_hash(build.manifest_hash)
        assert r is not None
        return r.state


def drifted_environment(store: LocalObjectStore) -> EnvironmentPin:
    """A recorded environment that differs from this one in numpy's version (its lockfile stored for the diff)."""
    lines = [("numpy==0.0.1" if line.startswith("numpy==") else line) for line in environment_lockfile().decode().splitlines()]
    data = "\n".join(lines).encode()
    store.put(data)
    return EnvironmentPin(hashlib.sha256(data).hexdigest(), platform.python_version())


@contextmanager
def corrupted(store: LocalObjectStore, digest: str) -> Iterator[None]:
    """Flip the object's bytes on disk for the block, then put them back (objects are shared across realizations)."""
    encrypting = SEALED.get(store.location)
    sealed = encrypting.keys.sealed(digest) if encrypting is not None else None
    path = encrypting.sealed_store.path(sealed) if encrypting is not None and sealed is not None else store.path(digest)  # type: ignore[attr-defined]
    original = path.read_bytes()
    mode = path.stat().st_mode
    os.chmod(path, 0o644)
    path.write_bytes(original[:-8] + b"\x00garbage")
    try:
        yield
    finally:
        path.write_bytes(original)
        os.chmod(path, mode)
