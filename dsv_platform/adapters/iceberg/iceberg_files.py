"""The data files of a canonical table's snapshots, hashed as a stream: what the platform recorded when it wrote them (#24 item 8).

After each commit the platform makes (an append, a row-level delete), :func:`seal_written` hashes every data file that
commit added and hands their SHA-256 and size to the table's :class:`FileLedger` (the registry, signed): a table
the ledger knows nothing of yet is backfilled with every live file of its current snapshot (trusted on first use).
:func:`live_files` and :func:`file_digest` are what a pinned read checks against the ledger. The pyiceberg objects
come from ``CanonicalTables``; this module never imports pyiceberg. Details: docs/trust.md ("Canonical data files").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from dsv_platform.core.errors import DsvError

CHUNK = 1 << 20
"""Bytes read at a time while hashing a data file: memory stays bounded whatever the file's size."""

RELOCATED_FROM = "dsv.relocated-from"
"""Table property: the JSON list of the table's former locations, oldest first (a moved home, iceberg_relocate.py)."""


@dataclass(frozen=True)
class DataFile:
    """One live data file of a snapshot: its path (as the metadata names it), size in bytes, and the snapshot that added it."""

    path: str
    size: int
    snapshot_id: int


@dataclass(frozen=True)
class FileDigest:
    path: str
    sha256: str
    size: int
    snapshot_id: int


class FileLedger(Protocol):
    """Where the digests of the files the platform wrote are kept (adapters/registry/data_files.py)."""

    def known_paths(self, table: str) -> set[str] | None:
        """The paths recorded for ``table``; None when it never recorded any (then a write backfills every live file)."""

    def ready(self) -> None:
        """Before a commit: whatever :meth:`record` needs to sign is ready (an error here stops the write before it lands)."""

    def record(self, table: str, digests: Sequence[FileDigest], *, backfilled: int) -> None: ...


def live_files(tbl: Any, snapshot_id: int | None, *, added_by: Collection[int] | None = None) -> list[DataFile]:
    """The data files a read of snapshot ``snapshot_id`` (None: the current one) reads, from the manifests alone.

    ``added_by``: only those of the manifests these snapshots wrote (a manifest older than a snapshot lists none of its files).
    """
    snap = tbl.current_snapshot() if snapshot_id is None else tbl.snapshot_by_id(snapshot_id)
    if snap is None:
        return []
    out = []
    for manifest in snap.manifests(tbl.io):
        if added_by is not None and manifest.added_snapshot_id not in added_by:
            continue
        for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
            f = entry.data_file
            out.append(DataFile(str(f.file_path), int(f.file_size_in_bytes), int(entry.snapshot_id if entry.snapshot_id is not None else snap.snapshot_id)))
    return sorted(out, key=lambda f: f.path)


def file_digest(tbl: Any, path: str) -> tuple[str, int]:
    """The SHA-256 (hex) and size of the data file at ``path``, read ``CHUNK`` bytes at a time through the table's file IO."""
    digest, size = hashlib.sha256(), 0
    with tbl.io.new_input(path).open() as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def named_here(tbl: Any, path: str) -> str:
    """``path``, recorded under one of the table's former locations (its home was moved), as the table names it now."""
    location = str(tbl.location()).rstrip("/")
    for old in json.loads(tbl.properties.get(RELOCATED_FROM, "[]")):
        old = str(old).rstrip("/")
        if path.startswith(old + "/"):
            return location + path[len(old) :]
    return path


def _since(tbl: Any, before: int | None, head: int | None = None) -> set[int]:
    """The snapshots from ``head`` (None: the current one) back to (not including) ``before``, following parents."""
    out: set[int] = set()
    snap = tbl.current_snapshot() if head is None else tbl.snapshot_by_id(head)
    while snap is not None and snap.snapshot_id != before and snap.snapshot_id not in out:
        out.add(int(snap.snapshot_id))
        snap = tbl.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return out


def seal_written(ledger: FileLedger | None, table: str, tbl: Any, *, before: int | None, head: int | None = None) -> list[FileDigest]:
    """Hash and record the files the commits after snapshot ``before`` added (all live files of a table the ledger never saw).

    ``head``: the snapshot those commits made last (a staging branch's head, iceberg_wap.py); None: the current one.
    """
    if ledger is None or (tbl.current_snapshot() if head is None else tbl.snapshot_by_id(head)) is None:
        return []
    known = ledger.known_paths(table)
    known = None if known is None else {named_here(tbl, p) for p in known}
    made = _since(tbl, before, head)
    files = live_files(tbl, head, added_by=None if known is None else made)  # a known table: only the manifests of the new commits
    todo = [f for f in files if f.snapshot_id in made or known is None]
    todo = [f for f in todo if known is None or f.path not in known]
    backfilled = sum(1 for f in todo if f.snapshot_id not in made)
    digests = [FileDigest(f.path, *file_digest(tbl, f.path), f.snapshot_id) for f in todo]
    if digests:
        ledger.record(table, digests, backfilled=backfilled)
    return digests


def snapshot_id_of(tbl: Any) -> int | None:
    """The id of ``tbl``'s current snapshot (None for a table with none)."""
    snap = tbl.current_snapshot()
    return None if snap is None else int(snap.snapshot_id)


def head_of(tbl: Any, branch: str | None) -> int | None:
    """The id of the snapshot at the head of ``branch`` (None: main, the current snapshot); None when it has none."""
    if branch is None:
        return snapshot_id_of(tbl)
    ref = tbl.refs().get(branch)
    return None if ref is None else int(ref.snapshot_id)


def target_of(tbl: Any, branch: str | None) -> str | None:
    """The ref an append commits to: main, else ``branch``; None (a staged snapshot, branched after) on a table without a snapshot."""
    return "main" if branch is None else branch if tbl.metadata.snapshots else None


def total_bytes(files: Iterable[DataFile]) -> int:
    return sum(f.size for f in files)


def listed_files(io: Any, location: str) -> Iterator[tuple[str, int, datetime]]:
    """Every file under the folder ``location`` (``file://`` or an object store such as ``s3://``): key, size, mtime (UTC).

    Through the table's own FileIO (its S3 endpoint and credentials). The key is a local file's decoded path, else
    the object's URI, as the metadata names it. A FileIO that cannot list raises: orphan cleanup fails closed.
    """
    from pyarrow import fs as pafs

    parsed = urlparse(location)
    scheme = parsed.scheme or "file"
    if not callable(getattr(io, "fs_by_scheme", None)):
        raise DsvError(f"{location}: the table's FileIO ({type(io).__name__}) cannot list files; orphan cleanup needs pyiceberg's PyArrowFileIO")
    path = unquote(parsed.path) if scheme == "file" else f"{parsed.netloc}{parsed.path}"
    filesystem = io.fs_by_scheme(scheme, parsed.netloc or None)
    for info in filesystem.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=True, allow_not_found=True)):
        if info.type == pafs.FileType.File:
            mtime = info.mtime if info.mtime is None or info.mtime.tzinfo else info.mtime.replace(tzinfo=UTC)
            yield (info.path if scheme == "file" else f"{scheme}://{info.path}"), int(info.size), mtime
