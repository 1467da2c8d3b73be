"""A builder SIGKILLed at every protocol step (a real process of its own), then rerun: no partial version, one converged publication."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from dsv_platform import open_dataset
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import NotFoundError
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures import forked
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

S = RealizationState
STEPS = ["candidate", "part_written", "sealed", "gates_run", "published"]
KILLED_IN = {"candidate": S.STAGING, "part_written": S.STAGING, "sealed": S.SEALED, "gates_run": S.SEALED, "published": S.PUBLISHED}
"""The state the candidate is left in by a kill after each step (the rerun resumes or converges from it)."""


@pytest.fixture(scope="module")
def clean_manifest_hash(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The manifest hash of an uninterrupted build in a separate registry and store."""
    root = tmp_path_factory.mktemp("clean")
    with Registry.from_url(f"sqlite:///{root / 'registry.db'}") as reg:
        pw.register(reg)
        return pw.build(reg, LocalObjectStore(root / "objects"), "clean").manifest.manifest_hash


def _worker(url: str, store: Path, *extra: str) -> forked.Worker:
    """The builder in a process of its own, forked from the server that imported the platform (fixtures/forked.py)."""
    return forked.Worker(pw.main, [url, str(store), "req-crash", *extra])


@pytest.mark.parametrize("step", STEPS)
def test_builder_killed_at_step_then_rerun_converges(step: str, backend_url: str, tmp_path: Path, clean_manifest_hash: str) -> None:
    with Registry.from_url(backend_url) as reg:
        pw.register(reg)
    store = tmp_path / "objects"
    marker = tmp_path / "marker"
    proc = _worker(backend_url, store, "--kill-step", step, "--marker", str(marker))
    deadline = time.monotonic() + 180
    while not marker.exists():
        assert proc.poll() is None, f"worker exited before {step}: {proc.communicate(0)[1][-3000:]}"
        assert time.monotonic() < deadline, f"worker never reached {step}"
        time.sleep(0.05)
    proc.kill()
    assert proc.communicate(timeout=60)[0] == -signal.SIGKILL

    with Registry.from_url(backend_url) as reg:
        if step == "published":
            assert reg.resolve(pw.NAME, pw.VERSION).manifest_hash == clean_manifest_hash
        else:
            with pytest.raises(NotFoundError):
                reg.resolve(pw.NAME, pw.VERSION)
            assert reg.versions(pw.NAME) == []
            with pytest.raises(NotFoundError):
                reg.resolve(pw.NAME, pw.VERSION, manifest_hash=clean_manifest_hash)
        killed = reg.find_by_request_id("req-crash")
        assert killed is not None and killed.state is KILLED_IN[step], (step, killed.state)

    code, out = _worker(backend_url, store).communicate(timeout=240)
    assert code == 0, out[-3000:]
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["manifest_hash"] == doc["published_hash"] == clean_manifest_hash
    assert doc["outcome"] == ("REPLAYED" if step == "published" else "CREATED")

    with Registry.from_url(backend_url) as reg:
        published = reg.versions(pw.NAME)
        assert [(r.state, r.manifest_hash) for r in published] == [(S.PUBLISHED, clean_manifest_hash)]
        assert [r.id for r in reg.versions(pw.NAME, include_candidates=True)] == [killed.id]  # the rerun resumed the same candidate
        assert [e.to_state for e in reg.events(killed.id)] == [S.STAGING, S.SEALED, S.PUBLISHED]
    settings = load_settings({"DSV_REGISTRY_URL": backend_url, "DSV_OBJECT_STORE": str(store), "DSV_ACTOR": "reader"})
    ds = open_dataset(f"{pw.NAME}:{pw.VERSION}", settings=settings)
    assert ds.manifest_hash == clean_manifest_hash
    assert ds.to_arrow().num_rows == pw.ROWS * len(pw.DAYS)
    assert ds.verify_content() == ds.content_hash
