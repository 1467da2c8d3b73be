"""Where an audit export is kept: a file, or an S3 object under Object Lock (docs/trust.md, "The audit log").

A file is written and read as it is. ``s3://bucket/key`` is written with COMPLIANCE retention (a bucket without Object
Lock is refused: fail closed); read back, every version of the key is fetched, because anyone with write credentials can
put a newer version over the key (the locked one stays). The copies relied on are the versions under COMPLIANCE
retention, oldest first; newer versions without a lock are reported, never relied on. With no version under retention
nothing at the key is unoverwritable, and the read is refused as UNTRUSTED.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.errors import AuditTamperedError, ConfigurationError, FileAccessError
from dsv_platform.core.trust import audit_seal

if TYPE_CHECKING:
    from dsv_platform.adapters.objects.s3_lock import LockedObjects, LockedVersion


def _objects(location: str, s3: S3Access) -> tuple[LockedObjects, str]:
    """The bucket's locked objects and the key (boto3 is imported only for an S3 location)."""
    from dsv_platform.adapters.objects.s3_lock import LockedObjects, parse_url

    bucket, key = parse_url(location)
    return LockedObjects(bucket, endpoint_url=s3.endpoint_url, region=s3.region), key


@dataclass(frozen=True)
class S3Access:
    endpoint_url: str | None = None
    region: str = "us-east-1"


@dataclass(frozen=True)
class ExportCopy:
    label: str
    """The file, or ``s3://bucket/key version V``."""
    doc: dict[str, Any]


@dataclass(frozen=True)
class ExportRead:
    location: str
    copies: tuple[ExportCopy, ...]
    """What to verify against, oldest first: the file, or every S3 version under COMPLIANCE retention."""
    note: str
    """One sentence saying which copies were relied on (and which were not)."""


def is_s3(location: str) -> bool:
    return location.startswith("s3://")


def parse_export(data: bytes, label: str) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{label}: not an audit export (not JSON: {exc})") from exc
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{label}: not an audit export (a JSON object expected)")
    return doc


def check_writable(location: str, *, lock_days: int, s3: S3Access) -> None:
    """Before anything is signed: an S3 location must be an object URL in a bucket with Object Lock, and the retention >= 1 day."""
    if is_s3(location):
        if lock_days < 1:
            raise ConfigurationError(f"{location}: the Object Lock retention must be at least 1 day, not {lock_days}")
        _objects(location, s3)[0].require_lock()


def write_export(location: str, doc: Mapping[str, Any], *, lock_days: int, s3: S3Access) -> str:
    """Write ``doc`` to ``location``; where it went, as a phrase (the S3 version and its retention)."""
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    if not is_s3(location):
        try:
            Path(location).write_bytes(data)
        except OSError as exc:
            raise FileAccessError(f"{location}: cannot write the audit export ({exc.strerror})") from exc
        return location
    objects, key = _objects(location, s3)
    version = objects.put_locked(key, data, lock_days)
    until = version.retain_until.isoformat() if version.retain_until else "?"
    return f"{location} (version {version.version_id}, {version.mode} lock until {until})"


def _label(location: str, v: LockedVersion) -> str:
    return f"{location} version {v.version_id} (stored {v.stored_at.isoformat()})"


def read_export(location: str, *, s3: S3Access, now: datetime | None = None) -> ExportRead:
    """The export at ``location``: the file, or the S3 key's versions under retention (refused as UNTRUSTED when there are none)."""
    if not is_s3(location):
        try:
            data = Path(location).read_bytes()
        except OSError as exc:
            raise FileAccessError(f"{location}: cannot read the audit export ({exc.strerror})") from exc
        return ExportRead(location, (ExportCopy(location, parse_export(data, location)),), f"checked against {location}")
    objects, key = _objects(location, s3)
    now = now or datetime.now(UTC)
    versions = objects.versions(key)
    locked = [v for v in versions if v.locked(now)]
    if not locked:
        raise AuditTamperedError(
            f"{location}: none of its {len(versions)} version(s) is under COMPLIANCE Object Lock retention: anyone with write "
            "credentials could have put it there, so it cannot anchor the log",
            detail={"location": location, "versions": len(versions)},
        )
    copies = tuple(ExportCopy(_label(location, v), parse_export(v.body, _label(location, v))) for v in locked)
    unlocked = len(versions) - len(locked)
    oldest = locked[0]
    note = (
        f"checked against every version of {location} under COMPLIANCE lock: {len(locked)} (oldest {oldest.version_id}, stored "
        f"{oldest.stored_at.isoformat()}, locked until {oldest.retain_until.isoformat() if oldest.retain_until else '?'})"
    )
    if unlocked:
        note += f"; {unlocked} version(s) without a lock not relied on (anyone with write credentials can replace them)"
    return ExportRead(location, copies, note)


def check_registry_against(entries: Sequence[Mapping[str, Any]], read: ExportRead) -> None:
    """The registry's log must hold every entry of every copy: AuditTamperedError naming the copy and the first difference."""
    for copy in read.copies:
        problem = audit_seal.compare_with_export(entries, copy.doc)
        if problem is not None:
            raise AuditTamperedError(f"the audit log does not verify against {copy.label}: {problem}", detail={"export": copy.label})


def check_copies_extend(read: ExportRead) -> None:
    """The log is append-only: each later copy must hold every entry of each earlier one (a forged newer version that cuts it is named)."""
    for older, newer in zip(read.copies, read.copies[1:], strict=False):
        problem = audit_seal.compare_with_export(list(newer.doc.get("entries") or []), older.doc, holder="the later version")
        if problem is not None:
            raise AuditTamperedError(f"{newer.label} does not extend {older.label}: {problem}", detail={"export": newer.label})
