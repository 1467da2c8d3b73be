"""The dataset record of a realization: its manifest's pins with its definition's purpose, owner and retention.

:func:`dataset_record` is what ``dsv resolve --json`` adds to the registry's record of a realization (the purpose
from the registered recipe, the retention from the active ``definition_retention`` roots, the rest from the
manifest). :func:`hold_retention` records a definition's ``retention_until`` as such a root, ``name:version~all``:
GC keeps every readable realization of the definition until then. Details: docs/publication.md
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.dataset_record import RETENTION_KIND
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import Realization

if TYPE_CHECKING:
    from dsv_platform.adapters.registry.registry import Registry
    from dsv_platform.bootstrap import Platform


def retention_ref(name: str, version: str) -> str:
    """The ref of a definition's retention root: every readable realization of ``name:version``."""
    return f"{name}:{version}~all"


def hold_retention(platform: Platform, definition: DatasetDefinition) -> int | None:
    """Record ``retention_until`` as a ``definition_retention`` root (idempotent); None when the definition declares none."""
    if definition.retention_until is None:
        return None
    reason = f"retention_until of {definition.ref} (datasets/{definition.name}_{definition.version}.yaml)"
    ref = retention_ref(definition.name, definition.version)
    return platform.registry.add_retention_root(RETENTION_KIND, ref, reason, definition.owner, definition.retention_until)


def retention_until(registry: Registry, name: str, version: str, *, now: dt.datetime | None = None) -> str | None:
    """The latest expiry among the definition's active retention roots (what GC enforces), ISO 8601, or None."""
    ref = retention_ref(name, version)
    active = [r.expires_at for r in registry.list_retention_roots(now or dt.datetime.now(dt.UTC), kind=RETENTION_KIND) if r.ref == ref]
    ends = [e for e in active if e is not None]
    return max(ends).astimezone(dt.UTC).isoformat() if ends else None


def dataset_record(registry: Registry, realization: Realization, manifest: Manifest) -> dict[str, Any]:
    """Purpose, owner, retention, feature versions, pins, code (commit, dirty, repo), environment, splits and quality report."""
    definition = registry.get_definition(realization.dataset, realization.version)
    recipe = json.loads(definition.recipe_json) if definition is not None else {}
    splits = manifest.splits
    return {
        "purpose": recipe.get("purpose"),
        "owner": definition.owner if definition is not None else None,
        "retention_until": retention_until(registry, realization.dataset, realization.version),
        "feature_versions": dict(manifest.feature_versions),
        "labels": manifest.labels.to_document() if manifest.labels else None,
        "sources": [s.to_document() for s in manifest.sources],
        "watermark": manifest.watermark,
        "observation_window": dict(manifest.observation_window) if manifest.observation_window is not None else None,
        "code": manifest.code.to_document() if manifest.code else None,
        "environment": manifest.environment.to_document() if manifest.environment else None,
        "recipe_hash": manifest.parameters.get("recipe_hash"),
        "splits": None if splits is None else {"policy": splits.to_document()["policy"], "counts": dict(splits.counts)},
        "quality_report": quality_report_object(registry, manifest.manifest_hash),
    }


def quality_report_object(registry: Registry, manifest_hash: str) -> str | None:
    """The stored quality report of a realization (the ``reports_on`` lineage edge; the signed statement names it too)."""
    for edge in registry.lineage_edges(node=("realization", manifest_hash)):
        if edge.relation == "reports_on" and edge.src_kind == "quality_report":
            return str(edge.src_id)
    return None
