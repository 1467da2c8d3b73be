"""The integrity scan the kill-safety tests rely on: it does see missing and orphaned things (local backends)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.services.retention import integrity
from dsv_platform_tests.services import kill_support as ks
from dsv_platform_tests.services import publisher_worker as pw


def test_integrity_scan_reports_missing_and_orphaned_beyond_the_window(tmp_path: Path) -> None:
    env = ks.local_env(tmp_path)
    ks.seed_world(env, seeds=(7,))
    with ks.platform(env) as p:
        assert integrity.scan(p, safety_window=ks.ZERO).ok
        stray = p.store.put(b"nothing names me")
        p.store.stage("c77-killed", "part.parquet", b"a killed build's part")
        assert integrity.scan(p, safety_window=timedelta(hours=24)).ok  # young: may belong to a build in flight
        orphaned = integrity.scan(p, safety_window=ks.ZERO).orphaned
        assert f"object {stray}" in orphaned and "staging c77-killed" in orphaned

        (realization,) = p.registry.versions(pw.NAME)
        assert realization.manifest_hash is not None
        part = Manifest.from_json(p.registry.get_manifest(realization.manifest_hash)).partitions[0].object
        sealed = p.store.keys.sealed(part)
        assert sealed is not None and p.store.sealed_store.delete(sealed)
        report = integrity.scan(p, safety_window=ks.ZERO)
        assert [m.split(" (")[0] for m in report.missing] == [f"object {part}"]
        assert f"key {part} (its ciphertext {sealed} is gone)" in report.orphaned


def test_a_healthy_home_scans_ok_past_the_safety_window(tmp_path: Path) -> None:
    """Issue 25 item 11: the environment-lock object a realization pins is kept by GC, so it is never reported orphaned."""
    from datetime import UTC, datetime

    from dsv_platform_tests.scenarios.support import World

    world = World.create(tmp_path / "home", rows_per_day=40, days=2)
    world.build()
    later = datetime.now(UTC) + timedelta(days=3)
    report = integrity.scan(world.platform, now=later, safety_window=timedelta(hours=24))
    assert report.ok, (report.missing, report.orphaned)
