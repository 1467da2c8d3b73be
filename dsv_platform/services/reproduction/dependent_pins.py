"""Pinning a report's or a model's source snapshots under tags named for it, each recorded in the registry.

The tags (``report-<name>-<hash12>``, ``model-<name>-<hash12>``: core/retention/dependent_pins.py) are made with the
retained ref age before the registry records them (a lineage edge per tag) and before the retention root is added:
a crash in between leaves a tag no record names, which GC treats as scratch. A source snapshot no longer in its
table (or a table no longer in the catalog) is not pinned: what the pin would keep is already gone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from dsv_platform.adapters.iceberg.iceberg_refs import pin_snapshot
from dsv_platform.adapters.iceberg.iceberg_values import PinnedSnapshot
from dsv_platform.core.lineage.lineage import Node
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.retention.dependent_pins import RETAINED_REF_AGE_MS, dependent_tag, pin_edge
from dsv_platform.services.lineage.lineage import record_edges

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def source_snapshots(manifest: Manifest) -> list[tuple[str, int]]:
    """``(table, snapshot id)`` of every source a realization's manifest pins."""
    return [(s.table, int(s.snapshot_id)) for s in manifest.sources if s.snapshot_id.isdigit()]


def pin_for(platform: Platform, owner: Node, name: str, sources: Iterable[tuple[str, int]]) -> tuple[PinnedSnapshot, ...]:
    """Tag every ``(table, snapshot id)`` in ``sources`` for ``owner`` (``artifact:<hash>`` or ``model_run:<hash>``) named ``name``."""
    wanted = sorted(set(sources))
    tables = platform.existing_tables()
    if tables is None or not wanted:
        return ()
    per_table: dict[str, int] = {}
    for table, _ in wanted:
        per_table[table] = per_table.get(table, 0) + 1
    present = set(tables.table_names())
    pins: list[PinnedSnapshot] = []
    for table, sid in wanted:
        if table not in present:
            continue
        tag = dependent_tag(owner[0], name, owner[1], snapshot_id=sid if per_table[table] > 1 else None)
        if tables.load(table).snapshot_by_id(sid) is None:
            continue
        pins.append(pin_snapshot(tables, table, tag, sid, max_ref_age_ms=RETAINED_REF_AGE_MS))
    record_edges(platform.registry, [pin_edge(p.table, p.tag, p.snapshot_id, owner, name=name) for p in pins], actor=platform.actor)
    return tuple(pins)


__all__ = ["pin_for", "source_snapshots"]
