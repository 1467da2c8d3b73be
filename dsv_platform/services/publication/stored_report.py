"""The quality report stored with a realization, as a reused build, the Dagster checks and ``dsv status`` read it again.

Reports are keyed by manifest hash (lineage ``quality_report --reports_on--> realization:<hash>``) and served only for
the manifest they name: a report re-pointed at another manifest, or one the store cannot give back, is refused
(:class:`StoredReportError`), never taken as that manifest's. Of several reports for one manifest (a candidate
blocked, then the same rows published) the newest that passed is the realization's. Details: docs/publication.md
"""

from __future__ import annotations

import json
from typing import Any

from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import DsvError, ObjectStoreError


class StoredReportError(DsvError):
    """A report the lineage names for the manifest that does not read, or that is another manifest's."""

    def __init__(self, message: str, *, digest: str, recorded_passed: bool) -> None:
        super().__init__(message)
        self.digest = digest
        self.recorded_passed = recorded_passed  # what the lineage edge recorded (``dsv status`` shows it for an unreadable report)


def stored_report(registry: Registry, store: ObjectStore, manifest_hash: str) -> dict[str, Any] | None:
    """The realization's stored report document (None when it has none); :class:`StoredReportError` for one refused."""
    docs: list[dict[str, Any]] = []
    for edge in reversed(registry.lineage_edges(node=("realization", manifest_hash))):  # newest first
        if edge.relation != "reports_on" or edge.src_kind != "quality_report" or edge.dst_id != manifest_hash:
            continue
        recorded = bool((edge.attributes or {}).get("passed"))
        try:
            doc = json.loads(store.get(edge.src_id))
        except (ObjectStoreError, ValueError) as e:
            raise StoredReportError(str(e).splitlines()[0] if str(e) else type(e).__name__, digest=edge.src_id, recorded_passed=recorded) from e
        made_for = doc.get("manifest_hash") if isinstance(doc, dict) else None
        if made_for != manifest_hash:
            raise StoredReportError(f"it is the report of manifest {made_for}, not of {manifest_hash}", digest=edge.src_id, recorded_passed=False)
        docs.append(doc)
    return next((d for d in docs if d.get("passed") is True), docs[0] if docs else None)


__all__ = ["StoredReportError", "stored_report"]
