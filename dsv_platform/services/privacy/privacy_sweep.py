"""Copies of a subject's rows that no manifest names: staged parts of killed or failed builds, and the
files of expired Iceberg snapshots.

:func:`sweep_staging` erases the subject from staged parts and
:func:`purge_unreferenced_files` deletes the files of expired snapshots, instead of leaving
them to GC's orphan-file collection.

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import io
from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.core.errors import DsvError, ObjectErasedError, ObjectNotFoundError


def holds_subject(data: bytes, subject_key: str) -> bool:
    """True if a Parquet part has a column value equal to ``subject_key``; other bytes: if they contain it."""
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError):
        return subject_key.encode() in data
    for column in table.columns:
        try:
            as_text = pc.cast(column, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        if pc.any(pc.equal(as_text, subject_key)).as_py():
            return True
    return False


def sweep_staging(store: EncryptingObjectStore, subject_key: str, *, keep: Collection[str] = ()) -> list[dict[str, Any]]:
    """Erase and remove every staged part holding the subject (see the module docstring); what was done, per part."""
    done: list[dict[str, Any]] = []
    for attempt in store.list_staging():
        for part in store.list_staged(attempt.attempt_id):
            entry = _sweep_part(store, attempt.attempt_id, part.name, subject_key, keep)
            if entry is not None:
                done.append(entry)
        if not store.list_staged(attempt.attempt_id):
            store.abandon(attempt.attempt_id)
    return done



class PrivacySweepError(DsvError):
    """A copy the sweep must inspect cannot be read: the deletion does not report done (fail closed)."""

def _sweep_part(store: EncryptingObjectStore, attempt: str, name: str, subject_key: str, keep: Collection[str]) -> dict[str, Any] | None:
    try:
        digest = store.staged_digest(attempt, name)
    except ObjectNotFoundError:  # the attempt finished or was abandoned meanwhile: no copy left
        return None
    if digest is not None and digest in keep:
        return None
    try:
        data = store.get_staged(attempt, name)
    except ObjectErasedError:  # erased already (its object was a descendant): only the noise is left
        store.delete_staged(attempt, name)
        return {"attempt": attempt, "part": name, "digest": digest, "outcome": "removed (key erased before)"}
    except ObjectNotFoundError:  # the attempt finished or was abandoned meanwhile: no copy left
        return None
    except DsvError as exc:  # unreadable is not "does not hold the subject": stop, name it (fail closed)
        raise PrivacySweepError(f"staged part {name} of attempt {attempt} cannot be read ({exc}); the sweep cannot tell whether it holds the subject") from exc
    if not holds_subject(data, subject_key):
        return None
    if digest is not None:
        store.erase(digest)
    store.delete_staged(attempt, name)
    return {"attempt": attempt, "part": name, "digest": digest, "outcome": "crypto_erased" if digest else "deleted"}


def snapshot_files(tbl: Any, snapshot_ids: Collection[int], *, live_only: bool = False) -> set[str]:
    """Data, manifest and manifest-list files the given snapshots of a loaded pyiceberg table reference (``live_only``: data files they hold)."""
    files: set[str] = set()
    for snap in tbl.snapshots():
        if snap.snapshot_id not in snapshot_ids:
            continue
        files.add(snap.manifest_list)
        for manifest in snap.manifests(tbl.io):
            if manifest.manifest_path in files:  # a manifest file never changes: snapshots share it, read it once
                continue
            files.add(manifest.manifest_path)
            files.update(entry.data_file.file_path for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=live_only))
    return files


def purge_unreferenced_files(tbl: Any, candidates: Collection[str]) -> list[str]:
    """Delete the ``candidates`` no snapshot of the (reloaded) table references any more; the paths deleted."""
    live = snapshot_files(tbl, {s.snapshot_id for s in tbl.snapshots()}, live_only=True)
    gone = sorted(set(candidates) - live)
    for path in gone:
        try:
            tbl.io.delete(path)
        except FileNotFoundError:
            continue
    return gone


__all__ = ["holds_subject", "purge_unreferenced_files", "snapshot_files", "sweep_staging"]
