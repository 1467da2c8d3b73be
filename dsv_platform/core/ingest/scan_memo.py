"""What a read-through of a batch found, remembered by the batch's SHA-256 for the rest of the process.

``dsv ingest`` reads each file three times over for the same answer: the check before the run, the landing
(rows per day) and the load (which rows are exact duplicates, whose key repeats). A :class:`BatchScan` is a
function of the batch's bytes and of its source's reading rules alone, so it is kept under the bytes' digest and
the source spec (its whole ``repr``: contract, aliases, null values, format). Callers remember a scan only when
the bytes they scanned are the digest's (hashed before and after). A miss is never wrong: it reads the batch again.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import BinaryIO, cast

from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.ingest.batch_stream import BatchScan, scan_batch
from dsv_platform.core.progress.stages import SILENT, Progress

ENTRIES = 256
"""Scans kept (least recently used out first): a small record each, counts and failures."""
MAX_FAILURES = 100_000
"""A scan with more failures than this is not kept: memory stays bounded by the entries."""

_scans: OrderedDict[tuple[str, str], BatchScan] = OrderedDict()
_lock = threading.Lock()


def _key(digest: str, spec: SourceSpec) -> tuple[str, str]:
    return digest, repr(spec)


def remember(digest: str, spec: SourceSpec, scan: BatchScan) -> None:
    """Keep ``scan`` as what the bytes of SHA-256 ``digest`` read as under ``spec``."""
    if len(scan.failures) > MAX_FAILURES:
        return
    with _lock:
        _scans[_key(digest, spec)] = scan
        _scans.move_to_end(_key(digest, spec))
        while len(_scans) > ENTRIES:
            _scans.popitem(last=False)


def recall(digest: str, spec: SourceSpec) -> BatchScan | None:
    """The scan remembered for these bytes under ``spec``, or None."""
    with _lock:
        scan = _scans.get(_key(digest, spec))
        if scan is not None:
            _scans.move_to_end(_key(digest, spec))
        return scan


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def scan_file(path: Path, spec: SourceSpec, progress: Progress = SILENT) -> tuple[str, BatchScan]:
    """The file's SHA-256 and :func:`scan_batch` of it: remembered, else read (and remembered when the bytes held still)."""
    before = _sha256(path)
    known = recall(before, spec)
    if known is not None:
        progress.advance(known.rows)
        return before, known
    scan = scan_batch(lambda: cast(BinaryIO, path.open("rb")), spec, progress=progress)
    after = _sha256(path)
    if after == before:
        remember(after, spec, scan)
    return after, scan


def forget() -> None:
    """Drop every remembered scan (tests)."""
    with _lock:
        _scans.clear()
