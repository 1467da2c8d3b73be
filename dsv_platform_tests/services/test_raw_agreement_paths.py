"""``integrity:raw_agreement``'s two paths (issue 28: the default set's quick half of test_raw_agreement, which is slow).

A batch of at most ``IN_MEMORY_ROWS`` canonical rows is compared in memory, a larger one in the build engine: on a real
embedded world both give the same agreements, for honest batches and for a data file whose amounts were multiplied by 100.
"""

from __future__ import annotations

from pathlib import Path

from dsv_platform.adapters.iceberg.iceberg_files import live_files
from dsv_platform.services.publication.raw_agreement import compare_source
from dsv_platform_tests.scenarios.support import World
from dsv_platform_tests.services.test_canonical_digests import rewrite_amounts


def test_small_batches_compared_in_memory_give_the_engines_result(tmp_path: Path) -> None:
    """The in-memory path for small batches and the engine's path give equal agreements: honest batches, and a file x100."""
    world = World.create(tmp_path / "home", days=3)
    spec = world.platform.config.sources["transactions"]

    def both() -> tuple[list[object], list[object]]:
        snapshot = world.platform.tables.load("transactions").current_snapshot().snapshot_id
        in_memory = compare_source(world.platform, spec, snapshot)
        in_engine = compare_source(world.platform, spec, snapshot, in_memory_rows=0)
        return in_memory, in_engine

    honest, engine = both()
    assert honest == engine and len(honest) >= 3 and all(r.agrees for r in honest), honest  # type: ignore[attr-defined]
    rewrite_amounts(live_files(world.platform.tables.load("transactions"), None)[0].path, factor=100)
    tampered, engine = both()
    assert tampered == engine, (tampered, engine)
    (bad,) = [r for r in tampered if not r.agrees]  # type: ignore[attr-defined]
    assert list(bad.columns) == ["amount"] and bad.canonical_hash != bad.raw_hash and bad.raw_rows == bad.canonical_rows > 0, bad  # type: ignore[attr-defined]
    world.platform.close()
