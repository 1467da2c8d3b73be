"""Issue 25 item 5: a build killed between its publication and the alias move does not leave the alias stale for good.

The state such a kill leaves: the new realization PUBLISHED, ``candidate`` still on the previous one. Before, a rerun
answered success (the request id's realization, reconciled) and left the alias where it was; now it completes the move,
and never moves the alias back from a realization published after the one it reconciles.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from dsv_platform.examples.fraud.events import late_transactions
from dsv_platform.services.publication.realization import ALIAS
from dsv_platform_tests.scenarios.support import World


def test_a_rerun_completes_the_alias_move_a_killed_build_left_undone(tmp_path: Path) -> None:
    world = World.create(tmp_path / "home", rows_per_day=40, days=3)
    first = world.build()
    day = world.domain.days(3)[1]
    world.ingest([late_transactions(world.domain, day, arrived=day + dt.timedelta(days=5), count=4)])
    second = world.build()
    assert first.ref != second.ref
    name, version = second.manifest.dataset, second.manifest.version
    alias = world.registry.get_alias(name, version, ALIAS)
    assert alias is not None and alias.target == second.manifest.manifest_hash
    world.registry.set_alias(name, version, ALIAS, first.manifest.manifest_hash, expect=second.manifest.manifest_hash, actor="killed-build")
    again = world.build()  # the same inputs: the published realization is reconciled, not rebuilt
    assert again.reused and again.ref == second.ref
    assert world.registry.get_alias(name, version, ALIAS).target == second.manifest.manifest_hash  # type: ignore[union-attr]
