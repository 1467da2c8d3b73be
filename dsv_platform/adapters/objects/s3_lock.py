"""S3 objects under Object Lock: written with COMPLIANCE retention, read back version by version (docs/trust.md, "The audit log").

An export of the audit log is only an anchor if the registry's credentials cannot replace it. :func:`put_locked` refuses a
bucket without Object Lock (:class:`ObjectLockMissingError`, fail closed) and writes the object with a COMPLIANCE
retention: nobody, the bucket's owner included, can delete or overwrite that version until it expires. Anyone with write
credentials can still put a *newer* version over the key, so :func:`versions` returns every version of the key, oldest
first, each with its lock: the reader decides which ones to rely on (those under retention).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dsv_platform.adapters.objects.s3_client import s3_client, s3_session
from dsv_platform.core.errors import EnvironmentSetupError, FileAccessError, ObjectLockMissingError

LOCK_MODE = "COMPLIANCE"
"""The only mode relied on: GOVERNANCE retention can be lifted by anyone granted ``s3:BypassGovernanceRetention``."""


@dataclass(frozen=True)
class LockedVersion:
    """One version of a key: its bytes, when S3 stored it, and its retention (None when it has none)."""

    version_id: str
    stored_at: datetime
    body: bytes
    mode: str | None
    retain_until: datetime | None

    def locked(self, now: datetime) -> bool:
        """Under COMPLIANCE retention at ``now``: nobody can delete or overwrite this version."""
        return self.mode == LOCK_MODE and self.retain_until is not None and self.retain_until > now


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` as (bucket, key); both must be there."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key or key.endswith("/"):
        raise FileAccessError(f"{url}: not an S3 object URL (s3://bucket/key expected)")
    return bucket, key


class LockedObjects:
    """Object-locked writes and versioned reads in one bucket (credentials from boto3's default chain)."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str = "us-east-1") -> None:
        self.bucket = bucket
        self.client: Any = s3_client(s3_session(f"s3://{bucket}", region=region), f"s3://{bucket}", endpoint_url=endpoint_url)

    def _fail(self, what: str, key: str, exc: Exception) -> FileAccessError:
        detail = exc.response.get("Error", {}).get("Code", exc) if isinstance(exc, ClientError) else exc
        return FileAccessError(f"s3://{self.bucket}/{key}: cannot {what} ({detail})")

    def require_lock(self) -> None:
        """Fail closed unless the bucket has Object Lock enabled."""
        try:
            config = self.client.get_object_lock_configuration(Bucket=self.bucket).get("ObjectLockConfiguration") or {}
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ObjectLockConfigurationNotFoundError":
                raise self._fail("read the bucket's Object Lock configuration", "", exc) from exc
            config = {}
        if config.get("ObjectLockEnabled") != "Enabled":
            raise ObjectLockMissingError(
                f"bucket {self.bucket!r} does not have S3 Object Lock enabled: an object there can be overwritten or deleted by anyone "
                "with its write credentials (create the bucket with Object Lock, or export to a file)"
            )

    def put_locked(self, key: str, body: bytes, days: int) -> LockedVersion:
        """Write ``body`` at ``key`` under COMPLIANCE retention for ``days`` days; the version written."""
        if days < 1:
            raise EnvironmentSetupError(f"s3://{self.bucket}/{key}: the retention must be at least 1 day, not {days}")
        self.require_lock()
        until = (datetime.now(UTC) + timedelta(days=days)).replace(microsecond=0)
        md5 = base64.b64encode(hashlib.md5(body, usedforsecurity=False).digest()).decode()  # S3 requires it with a lock
        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentMD5=md5, ObjectLockMode=LOCK_MODE, ObjectLockRetainUntilDate=until)
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("write the locked object", key, exc) from exc
        return LockedVersion(str(answer.get("VersionId") or ""), datetime.now(UTC), body, LOCK_MODE, until)

    def versions(self, key: str) -> list[LockedVersion]:
        """Every version stored at ``key`` (not the other keys under it as a prefix), oldest first; FileAccessError when none is."""
        listed: list[dict[str, Any]] = []
        try:
            for page in self.client.get_paginator("list_object_versions").paginate(Bucket=self.bucket, Prefix=key):
                listed += [v for v in page.get("Versions") or [] if v.get("Key") == key]
            found = [self._version(key, v) for v in reversed(listed)]  # S3 lists a key's versions newest first
        except (ClientError, BotoCoreError) as exc:
            raise self._fail("read the object's versions", key, exc) from exc
        if not found:
            raise FileAccessError(f"s3://{self.bucket}/{key}: no such object")
        return sorted(found, key=lambda v: v.stored_at)  # stable: versions stored in the same second keep S3's order

    def _version(self, key: str, listed: dict[str, Any]) -> LockedVersion:
        vid = str(listed["VersionId"])
        got = self.client.get_object(Bucket=self.bucket, Key=key, VersionId=vid)
        until = got.get("ObjectLockRetainUntilDate")
        return LockedVersion(vid, listed["LastModified"], got["Body"].read(), got.get("ObjectLockMode"), until)
