"""The drop location on S3 (``DSV_DROP_FOLDER=s3://bucket/prefix``): list its objects cheaply, download one to a local file.

A batch is an object directly under the prefix whose name (the key after the prefix) is a plain file name. Anything else
(a sub-prefix, ``..``, a name no file can have) is never downloaded: :meth:`S3DropPrefix.entries` yields it with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dsv_platform.adapters.objects.s3_client import s3_client, s3_session
from dsv_platform.core.errors import ConfigurationError, ObjectNotFoundError, ObjectStoreError

_CHUNK = 1 << 20
_NAME_BYTES = 255  # the longest file name a local file system takes


@dataclass(frozen=True)
class DropObject:
    """An object under the drop prefix: its name (the key after the prefix) and what says it may have changed without reading it."""

    name: str
    stat: str
    """Size, ETag and LastModified: a new upload of the key changes at least LastModified."""


@dataclass(frozen=True)
class Refused:
    """An entry under the drop prefix that is never landed, and why."""

    name: str
    reason: str


def name_reason(name: str, location: str) -> str | None:
    """Why ``name`` is not a drop-prefix batch name (a sub-prefix, ``.``/``..``, a character or length no file name has), else None."""
    if "/" in name or "\\" in name:
        return f"{location}/{name}: not directly under the drop prefix {location} (a key below it, or one escaping it, is never landed)"
    if name in ("", ".", "..") or any(ord(c) < 32 for c in name) or len(name.encode()) > _NAME_BYTES:
        return f"{location}/{name!r}: not a file name (empty, '.', '..', a control character or over {_NAME_BYTES} bytes), never landed"
    return None


class S3DropPrefix:
    """``s3://bucket/prefix`` read with the default credential chain (``AWS_*``), at ``endpoint_url`` when set (a loopback server)."""

    def __init__(self, url: str, *, endpoint_url: str | None = None, region: str = "us-east-1") -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not url.startswith("s3://") or not bucket:
            raise ConfigurationError(f"drop location {url!r} is not s3://BUCKET/PREFIX")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client: Any = s3_client(s3_session(f"drop location {self.location}", region=region), self.location, endpoint_url=endpoint_url)

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def entries(self, pattern: str = "") -> Iterator[DropObject | Refused]:
        """Every object directly under the prefix whose name starts with ``pattern``, by name, a page (1,000 keys) at a time; a
        sub-prefix or an unusable name as :class:`Refused` (one entry per sub-prefix, whatever it holds)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix + pattern, Delimiter="/")
        try:
            for page in pages:
                for common in page.get("CommonPrefixes", []):
                    name = common["Prefix"][len(self.prefix) :]
                    yield Refused(name, f"{self.location}/{name}: a sub-prefix; only objects directly under the drop prefix land (none below or escaping it)")
                for obj in page.get("Contents", []):
                    name = obj["Key"][len(self.prefix) :]
                    if not name:
                        continue  # the prefix's own "folder" marker
                    reason = name_reason(name, self.location)
                    if reason is not None:
                        yield Refused(name, reason)
                    else:
                        yield DropObject(name, f"{obj['Size']}:{obj['ETag'].strip(chr(34))}:{obj['LastModified'].isoformat()}")
        except (BotoCoreError, ClientError) as exc:
            raise ObjectStoreError(f"listing the drop location {self.location}: {exc}") from exc

    def download(self, name: str, folder: Path) -> Path:
        """The object ``name`` streamed into ``folder/name`` (bounded memory: a megabyte at a time); the local path."""
        reason = name_reason(name, self.location)
        if reason is not None:
            raise ConfigurationError(f"refused, nothing landed: {reason}")
        target = folder / name
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
            with target.open("wb") as out:
                for chunk in body.iter_chunks(_CHUNK):
                    out.write(chunk)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise ObjectNotFoundError(f"no such batch object {self.location}/{name}") from exc
            raise ObjectStoreError(f"downloading {self.location}/{name}: {exc}") from exc
        except BotoCoreError as exc:
            raise ObjectStoreError(f"downloading {self.location}/{name}: {exc}") from exc
        return target
