"""Pinned canonical snapshots are checked file by file against the digests the platform recorded when it wrote them (#24 item 8).

:func:`check_pinned_files` re-hashes (as a stream) every data file a pinned snapshot reads and compares it with the
SHA-256 and size in the registry (adapters/registry/data_files.py): a file rewritten in the warehouse, a file of a
sealed table with no recorded digest, or one that cannot be read is CORRUPT naming the table and the file. A table
the platform wrote before digests were recorded is reported unverified until its next write seals it.
Called when a build pins its inputs and by ``dsv verify``. Details: docs/trust.md ("Canonical data files").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.iceberg.iceberg_files import file_digest, live_files, named_here
from dsv_platform.adapters.registry.data_files import DataFileLedger
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.errors import DataFileCorruptError

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

log = logging.getLogger(__name__)


@dataclass
class FileCheck:
    """What a check of pinned snapshots found: files and bytes re-hashed, and the files no digest covers (tables written before)."""

    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    unverified: list[str] = field(default_factory=list)  # "table: path"

    def to_document(self) -> dict[str, Any]:
        return {"files": self.files, "bytes": self.bytes, "seconds": round(self.seconds, 3), "unverified": list(self.unverified)}


def _corrupt(table: str, path: str, snapshot_id: int, message: str, **detail: object) -> DataFileCorruptError:
    where = f"{table}: data file {path} of snapshot {snapshot_id}"
    return DataFileCorruptError(f"{where} {message}", ref=table, detail={"table": table, "path": path, "snapshot_id": snapshot_id, **detail})


def check_snapshot(platform: Platform, table: str, snapshot_id: int, check: FileCheck | None = None) -> FileCheck:
    """Re-hash the live data files of ``table`` at ``snapshot_id`` against their recorded digests (DataFileCorruptError on a mismatch)."""
    check = check if check is not None else FileCheck()
    started = time.monotonic()
    tbl = platform.tables.load(table)
    sealed, recorded = DataFileLedger.of(platform.registry).digests(table)
    recorded = {named_here(tbl, path): digest for path, digest in recorded.items()}  # recorded before the home was moved
    for f in live_files(tbl, snapshot_id):
        want = recorded.get(f.path)
        if want is None:
            if sealed:
                raise _corrupt(table, f.path, snapshot_id, "has no recorded digest, though the platform records one for every file it writes to "
                               "this table (a digest row was deleted, or the file was added outside the platform)")  # fmt: skip
            check.unverified.append(f"{table}: {f.path}")
            continue
        try:
            sha, size = file_digest(tbl, f.path)
        except OSError as exc:
            raise _corrupt(table, f.path, snapshot_id, f"cannot be read ({exc})") from exc
        if (sha, size) != (want.sha256, want.size):
            raise _corrupt(
                table, f.path, snapshot_id,
                f"is {sha} ({size} bytes), but the platform recorded {want.sha256} ({want.size} bytes) when it wrote it: "
                "the file was changed in the warehouse",
                recorded_sha256=want.sha256, found_sha256=sha, recorded_size=want.size, found_size=size,
            )  # fmt: skip
        check.files, check.bytes = check.files + 1, check.bytes + size
    check.seconds += time.monotonic() - started
    return check


def check_pinned_files(platform: Platform, specs: Iterable[TableSpecLike], pins: Mapping[str, int]) -> FileCheck:
    """:func:`check_snapshot` of every pinned table (``pins``: table -> snapshot id); unverified files are logged as a warning."""
    check = FileCheck()
    for spec in specs:
        if spec.name in pins:
            check_snapshot(platform, spec.name, pins[spec.name], check)
    if check.unverified:
        tables = sorted({u.split(":", 1)[0] for u in check.unverified})
        log.warning("%d data file(s) of %s have no recorded digest (written before digests were recorded): unverified until the table's next "
                    "write records them", len(check.unverified), ", ".join(tables))  # fmt: skip
    return check


def check_manifest_sources(platform: Platform, sources: Iterable[Any]) -> dict[str, Any]:
    """``dsv verify``: the source snapshots a manifest pinned (``SourcePin``s), where they still exist; those gone are listed."""
    check, gone = FileCheck(), list[str]()
    tables = platform.existing_tables()
    names = set(tables.table_names()) if tables is not None else set()
    for pin in sources:
        try:
            sid = int(pin.snapshot_id)
        except ValueError:
            gone.append(f"{pin.table}@{pin.snapshot_id}")
            continue
        if tables is None or pin.table not in names or tables.load(pin.table).snapshot_by_id(sid) is None:
            gone.append(f"{pin.table}@{sid}")  # expired or never here (another warehouse): nothing to re-hash
            continue
        check_snapshot(platform, pin.table, sid, check)
    return check.to_document() | {"not_checked": gone}


__all__ = ["FileCheck", "check_manifest_sources", "check_pinned_files", "check_snapshot"]
