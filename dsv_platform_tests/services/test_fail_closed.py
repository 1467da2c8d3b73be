"""Issue 25 item 9 (GC inventory and the privacy sweep): an error they did not expect stops them; it never means "nothing to protect".

Before: GC's inventory caught the base DsvError (so "service unreachable" or a corrupt document) while reading staged
parts and run manifests, and the privacy sweep treated an unreadable staged part as not holding the subject.
Now only a copy that is gone (or already erased) is skipped; anything else stops with a line naming the copy.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import DsvError
from dsv_platform.services.privacy.privacy_sweep import PrivacySweepError, _sweep_part
from dsv_platform.services.retention import gc
from dsv_platform.settings import load_settings


def _flip_last_byte(path: Path) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupt_run_manifest_stops_the_gc_inventory_a_missing_one_does_not(tmp_path: Path) -> None:
    with build_platform(load_settings({"DSV_HOME": str(tmp_path)})) as p:
        run_object = p.store.put(b'{"inputs": []}')
        gone = p.store.put(b'{"inputs": ["soon gone"]}')
        p.registry.record_lineage(
            [("realization", "a" * 64, "model_run", "b" * 64, "trained", {"run_object": run_object}),
             ("realization", "a" * 64, "model_run", "c" * 64, "trained", {"run_object": gone})],
            actor="test",
        )  # fmt: skip
        p.store.delete(gone)
        inventory = gc.collect_inventory(p.registry, p.store)
        assert inventory.run_manifests == {"b" * 64: {"inputs": []}}  # a run manifest that is gone: nothing to keep through it
        sealed = p.store.keys.sealed(run_object)
        _flip_last_byte(p.store.sealed_store.path(sealed) if sealed else p.store.inner.path(run_object))
        with pytest.raises(DsvError, match=run_object[:12]):
            gc.collect_inventory(p.registry, p.store)


def test_an_unreadable_staged_part_stops_the_sweep(tmp_path: Path) -> None:
    with build_platform(load_settings({"DSV_HOME": str(tmp_path)})) as p:
        store = p.store
        store.stage("attempt-1", "part-1.parquet", b"rows of somebody")
        staged = next((Path(store.inner.location) / "staging" / "attempt-1").glob("part-1.parquet"))
        _flip_last_byte(staged)
        with pytest.raises(PrivacySweepError, match=r"staged part part-1\.parquet of attempt attempt-1 cannot be read"):
            _sweep_part(store, "attempt-1", "part-1.parquet", "subject-key", keep=())
        store.delete_staged("attempt-1", "part-1.parquet")
        assert _sweep_part(store, "attempt-1", "part-1.parquet", "subject-key", keep=()) is None  # gone: no copy left
