"""The canonical stage of a privacy deletion: the row-level delete, then the release and expiry of older snapshots holding the subject.

Every step is idempotent, so a rerun (or ``dsv privacy reconcile``) after a kill anywhere in it finishes it:
the subject's key is found again in the older snapshots when the current one no longer holds it.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsv_platform.adapters.iceberg import iceberg_wap as wap
from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.dependent_pins import parse_dependent_tag
from dsv_platform.services.lineage.lineage import record_snapshot_succession
from dsv_platform.services.privacy.privacy_sweep import purge_unreferenced_files, snapshot_files


def find_subject_key(tables: CanonicalTables, spec: SourceSpec, column: str, matches: Callable[[str], bool]) -> str | None:
    """The value of ``column`` for which ``matches`` (the subject's hash compares equal) holds, in any snapshot, newest first.

    None only when no snapshot of the table holds the subject (so no copy is left to delete).
    """
    tbl = tables.table(spec)
    seen: set[str] = set()
    for snap in sorted(tbl.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True):
        values = tbl.scan(snapshot_id=snap.snapshot_id, selected_fields=(column,)).to_arrow().column(column)
        for v in {str(x) for x in values.to_pylist() if x is not None} - seen:
            if matches(v):
                return v
            seen.add(v)
    return None


def snapshots_naming(tbl: Any, column: str, key: str) -> set[int]:
    """Snapshots of a loaded pyiceberg table with a manifest entry (of any status) whose ``column`` bounds are the key (or a truncated prefix of it)."""
    field_id = tbl.schema().find_field(column).field_id
    wanted = key.encode()
    named: dict[str, bool] = {}
    out: set[int] = set()
    for snap in tbl.snapshots():
        for manifest in snap.manifests(tbl.io):
            if manifest.manifest_path not in named:
                named[manifest.manifest_path] = any(
                    bound and wanted.startswith(bound)
                    for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=False)
                    for bound in ((entry.data_file.lower_bounds or {}).get(field_id), (entry.data_file.upper_bounds or {}).get(field_id))
                )
            if named[manifest.manifest_path]:
                out.add(snap.snapshot_id)
    return out


def delete_canonical(tables: CanonicalTables, spec: SourceSpec, key: str, tag_states: dict[str, str]) -> dict[str, Any]:
    """Row-level delete on the current snapshot, then release and expire older snapshots that still hold the subject.

    ``tag_states``: tag -> the state of the published realization pinning it. Tags of REDACTED realizations and of
    builds that never published are released; the snapshots left unpinned are expired and the files only they referenced deleted.
    Snapshots holding the subject are those with its rows, and those whose manifests name it in a column bound
    (the DELETED entries of a row-level delete: the current snapshot is first committed again without them). A staging
    branch a blocked load left on one of them is removed (write-audit-publish, docs/storage.md): its rows were never published.
    """
    column = spec.entity
    assert column is not None
    ident = tables.identifier(spec)
    where = (column, key)
    deletion = tables.delete_rows(spec, where)
    tables.drop_deleted_manifests(spec)  # the delete's DELETED entries keep the old file's bounds: the current snapshot must not name them
    holding = set(tables.snapshots_matching(spec, where)) | snapshots_naming(tables.catalog.load_table(ident), column, key)
    pinned_by: dict[int, list[str]] = {}
    for tag, sid in tables.tags(spec).items():
        if sid in holding:
            pinned_by.setdefault(sid, []).append(tag)
    states = {t: _state(t, tags, tag_states) for tags in pinned_by.values() for t in tags}
    release = sorted(t for t, state in states.items() if state in (None, RealizationState.REDACTED.value))
    removed = tables.remove_tags(spec, release)
    still = {sid: sorted(t for t in tags if t not in removed) for sid, tags in pinned_by.items()}
    still = {sid: tags for sid, tags in still.items() if tags}
    staged = [name for name, sid, _ in wap.staging_refs(tables.catalog.load_table(ident)) if sid in holding]
    dropped = [name for name in staged if wap.discard(tables, spec.name, name)]  # a blocked load's rows (never published) go too
    candidates = snapshot_files(tables.catalog.load_table(ident), holding - set(still))
    expired = tables.expire(spec, sorted(holding - set(still)))
    purged = purge_unreferenced_files(tables.catalog.load_table(ident), candidates) if expired else []
    return {
        **deletion.to_document(),
        "snapshot_current": tables.current_snapshot_id(spec),  # after the manifest rewrite: what new builds pin
        "removed_tags": removed,
        "removed_staging_branches": dropped,
        "expired_snapshots": expired,
        "purged_files": len(purged),
        "protected_snapshots": {str(sid): [{"tag": t, "realization_state": states.get(t)} for t in tags] for sid, tags in sorted(still.items())},
        "note": (
            "files only expired snapshots referenced are deleted now; "
            "protected snapshots are released when the realizations pinning them are REDACTED or expire"
        ),
    }


def record_deletion_lineage(registry: Registry, detail: dict[str, Any], *, actor: str) -> dict[str, Any]:
    """``detail`` (a :func:`delete_canonical` document) after linking the deletion's snapshots to the one it replaced in lineage."""
    chain = (detail.get("snapshot_before"), detail.get("snapshot_after"), detail.get("snapshot_current"))
    record_snapshot_succession(registry, str(detail["table"]), chain, actor=actor)
    return detail


def _state(tag: str, same_snapshot: list[str], tag_states: dict[str, str]) -> str | None:
    """The state a tag is released by: its realization's; a report's or model's pin (core/retention/dependent_pins.py) takes
    that of a realization still protecting the same snapshot, so it is released with them and keeps nothing they do not."""
    if tag in tag_states or parse_dependent_tag(tag) is None:
        return tag_states.get(tag)
    protecting = sorted(state for t in same_snapshot if (state := tag_states.get(t)) not in (None, RealizationState.REDACTED.value))
    return protecting[0] if protecting else None


__all__ = ["delete_canonical", "find_subject_key", "record_deletion_lineage", "snapshots_naming"]
