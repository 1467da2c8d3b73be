"""Pinning a report's or a model's source snapshots under tags named for it, each recorded in the registry.

The tags (``report-<name>-<hash12>``, ``model-<name>-<hash12>``: core/retention/dependent_pins.py) are recorded in
the registry (a lineage edge per tag) before they are made, with the retained ref age, and both before the retention
root is added: GC never meets such a tag without its record (a tag without one is scratch to it), and a crash before
the root leaves a pin whose owner nothing retains, which ages out. A source snapshot no longer in its table (or a
table no longer in the catalog) is not pinned: what the pin would keep is already gone.
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
    todo = [
        (table, dependent_tag(owner[0], name, owner[1], snapshot_id=sid if per_table[table] > 1 else None), sid)
        for table, sid in wanted
        if table in present and tables.load(table).snapshot_by_id(sid) is not None
    ]
    record_edges(platform.registry, [pin_edge(table, tag, sid, owner, name=name) for table, tag, sid in todo], actor=platform.actor)
    return tuple(pin_snapshot(tables, table, tag, sid, max_ref_age_ms=RETAINED_REF_AGE_MS) for table, tag, sid in todo)


__all__ = ["pin_for", "source_snapshots"]
