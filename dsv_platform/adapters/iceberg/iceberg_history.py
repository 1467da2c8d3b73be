"""Which snapshots of a table's whole history hold a row matching a filter, reading each file once.

Snapshots share their manifests and data files (an append writes one manifest and lists the older ones again), and
Iceberg never rewrites a file in place: so a manifest's entries and a data file's rows are the same whichever snapshot
names them. A scan per snapshot read every manifest of every snapshot again (on a table of n appends, n^2 / 2
manifest reads: 6,808 for 116 snapshots, 15 s, for each privacy deletion); here each manifest is read once, pruned by
the filter on its partitions and column bounds as a scan prunes it, and each surviving data file is read once
(the filter's columns only).
A snapshot with delete files (merge-on-read, which the platform never writes) is scanned as before.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.visitors import bind, extract_field_ids
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import prune_columns
from pyiceberg.table import FileScanTask, ManifestGroupPlanner


def snapshots_holding(tbl: Any, row_filter: BooleanExpression) -> list[int]:
    """Ids of the snapshots of a loaded pyiceberg table (in its snapshot order) whose rows include one matching ``row_filter``."""
    planner = ManifestGroupPlanner(tbl.metadata, tbl.io, row_filter)
    candidates: dict[str, list[Any]] = {}  # manifest path -> its live data files the filter may match (bounds, partition)
    holds: dict[str, bool] = {}  # data file path -> it has a matching row
    filtered = prune_columns(tbl.schema(), extract_field_ids(bind(tbl.schema(), row_filter, case_sensitive=True)), select_full_types=False)
    scan = ArrowScan(tbl.metadata, tbl.io, filtered, row_filter, limit=1)  # the filter's columns only: a wide row is not read

    def file_holds(data_file: Any) -> bool:
        path = str(data_file.file_path)
        if path not in holds:
            holds[path] = scan.to_table([FileScanTask(data_file)]).num_rows > 0
        return holds[path]

    out = []
    for snap in tbl.snapshots():
        manifests = snap.manifests(tbl.io)
        if any(m.content != ManifestContent.DATA for m in manifests):  # delete files apply: pyiceberg's own scan
            if tbl.scan(row_filter=row_filter, snapshot_id=snap.snapshot_id, limit=1).to_arrow().num_rows:
                out.append(snap.snapshot_id)
            continue
        for m in manifests:
            if m.manifest_path not in candidates:
                candidates[m.manifest_path] = [e.data_file for entries in planner.plan_manifest_entries([m]) for e in entries]
        if any(file_holds(f) for m in manifests for f in candidates[m.manifest_path]):
            out.append(snap.snapshot_id)
    return out
