"""The object store on S3 (AWS, or any S3-speaking server through ``endpoint_url``).

Write-once through conditional writes (``If-None-Match: *``), with the same guarantees as
the local store: the key is the digest, known before the upload; large objects go in parts.

Details: docs/storage.md
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast
from urllib.parse import urlparse

import pyarrow.fs as pafs
from botocore.exceptions import BotoCoreError, ClientError

from dsv_platform.adapters.objects.object_store import (
    CHUNK_SIZE,
    OBJECTS_PREFIX,
    STAGING_PREFIX,
    ObjectInfo,
    ObjectStore,
    StagedObject,
    StagingAttempt,
    check_attempt,
    check_name,
    digest_of_key,
    hash_stream,
    object_key,
)
from dsv_platform.adapters.objects.s3_client import s3_client, s3_session
from dsv_platform.core.errors import ObjectConflictError, ObjectNotFoundError, ObjectStoreError
from dsv_platform.core.publication.retry import retry

MiB = 1024 * 1024
Upload = Callable[[dict[str, str]], None]
_ATTEMPTS = 5


def _status(exc: ClientError) -> tuple[str, int]:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return code, int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _missing(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 404 or code in ("404", "NoSuchKey", "NotFound")


def _precondition_failed(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 412 or code == "PreconditionFailed"


def _unsupported(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 501 or code == "NotImplemented"


class _LostRace(Exception):
    """A conditional create lost to another writer (or the store changed mode): the create is tried again."""


def _conditional_conflict(exc: ClientError) -> bool:
    code, status = _status(exc)
    return status == 409 or code == "ConditionalRequestConflict"


class S3ObjectStore(ObjectStore):
    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        verify_writes: bool = True,
        multipart_threshold: int = 256 * MiB,
        part_size: int = 64 * MiB,
    ) -> None:
        if part_size < 5 * MiB:
            raise ObjectStoreError(f"part_size {part_size} is below S3's 5 MiB minimum")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        self.region = region
        self.verify_writes = verify_writes
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.conditional_writes = True  # cleared when the server answers 501 to If-None-Match
        self._session = s3_session(f"object store {self.location}", region=region, access_key=access_key, secret_key=secret_key, session_token=session_token)
        self.client: Any = s3_client(self._session, self.location, endpoint_url=endpoint_url)

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, relative: str) -> str:
        return self.prefix + relative

    def _fail(self, what: str, key: str, exc: Exception) -> ObjectStoreError:
        return ObjectStoreError(f"{what} s3://{self.bucket}/{key}: {exc}")

    # -- objects --------------------------------------------------------
    def _put(self, stream: BinaryIO) -> str:
        with self._seekable(stream) as (body, start, digest, size):
            key = self.key(object_key(digest))

            def upload(cond: dict[str, str]) -> None:
                body.seek(start)
                self._upload_stream(key, body, size, cond)

            return self._create(digest, upload)

    @contextlib.contextmanager
    def _seekable(self, stream: BinaryIO) -> Iterator[tuple[BinaryIO, int, str, int]]:
        if getattr(stream, "seekable", lambda: False)():
            start = stream.tell()
            digest, size = hash_stream(stream)
            yield stream, start, digest, size
            return
        with tempfile.SpooledTemporaryFile(max_size=4 * CHUNK_SIZE) as spool:
            digest, size = hash_stream(stream, spool.write)
            yield cast(BinaryIO, spool), 0, digest, size

    def _upload_stream(self, key: str, body: BinaryIO, size: int, cond: dict[str, str]) -> None:
        if size <= self.multipart_threshold:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentLength=size, **cond)
            return

        def parts(upload_id: str) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            while data := body.read(self.part_size):
                n = len(out) + 1
                etag = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=data)["ETag"]
                out.append({"ETag": etag, "PartNumber": n})
            return out

        self._multipart(key, parts, cond)

    def _multipart(self, key: str, parts: Callable[[str], list[dict[str, Any]]], cond: dict[str, str]) -> None:
        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
        try:
            done = parts(upload_id)
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}, **cond
            )
        except BaseException:
            with contextlib.suppress(ClientError, BotoCoreError):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
            raise

    def _create(self, digest: str, upload: Upload) -> str:
        """Create the object key if absent (see the module docstring), then verify it."""
        key = self.key(object_key(digest))
        kept = ObjectStoreError(f"cannot create object {digest} at s3://{self.bucket}/{key}: it kept appearing and vanishing")
        if retry(lambda _: self._create_once(digest, key, upload), attempts=_ATTEMPTS, again=lambda e: isinstance(e, _LostRace), exhausted=lambda _: kept):
            return digest  # it was there already, with our bytes
        if self.verify_writes:
            try:
                self.verify(digest)
            except ObjectStoreError:
                with contextlib.suppress(ClientError):
                    self.client.delete_object(Bucket=self.bucket, Key=key)
                raise
        return digest

    def _create_once(self, digest: str, key: str, upload: Upload) -> bool:
        """One attempt: True when the object was already there with our bytes, False when uploaded; a lost race raises _LostRace."""
        try:
            if not self.conditional_writes:
                if self._same_as_existing(digest):
                    return True
                upload({})
                return False
            upload({"IfNoneMatch": "*"})
            return False
        except ClientError as exc:
            if not self.conditional_writes:
                raise self._fail(f"cannot create object {digest} at", key, exc) from exc
            if _precondition_failed(exc):
                if self._same_as_existing(digest):
                    return True
            elif _unsupported(exc):
                self.conditional_writes = False
            elif not _conditional_conflict(exc):
                raise self._fail(f"cannot create object {digest} at", key, exc) from exc
            raise _LostRace(str(exc)) from exc

    def _same_as_existing(self, digest: str) -> bool:
        """True if the key holds these bytes, False if it is absent; ObjectConflictError if it holds others."""
        key = self.key(object_key(digest))
        found = self._hash_key(key)
        if found is None:
            return False
        if found[0] != digest:
            raise ObjectConflictError(
                f"object {digest} already exists at s3://{self.bucket}/{key} holding bytes that hash to {found[0]}; "
                "it was not overwritten: the stored object is corrupt, repair or delete it"
            )
        return True

    def _hash_key(self, key: str, **conditions: str) -> tuple[str, int] | None:
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key, **conditions)["Body"]
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        with body:
            return hash_stream(cast(BinaryIO, body))

    def _get_body(self, key: str, what: str) -> BinaryIO:
        try:
            return cast(BinaryIO, self.client.get_object(Bucket=self.bucket, Key=key)["Body"])
        except ClientError as exc:
            if _missing(exc):
                raise ObjectNotFoundError(f"{what} not found at s3://{self.bucket}/{key}") from exc
            raise self._fail(f"cannot read {what} at", key, exc) from exc

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], self.client.head_object(Bucket=self.bucket, Key=key))
        except ClientError as exc:
            if _missing(exc):
                return None
            raise self._fail("cannot head", key, exc) from exc

    def _open_raw(self, digest: str) -> BinaryIO:
        return self._get_body(self.key(object_key(digest)), f"object {digest}")

    def read_head(self, digest: str, n: int) -> bytes:
        """The object's first ``n`` bytes through one ranged GET (the whole object is not fetched)."""
        key = self.key(object_key(digest))
        if n <= 0:
            return b""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes=0-{n - 1}")["Body"]
        except ClientError as exc:
            if _missing(exc):
                raise ObjectNotFoundError(f"object {digest} not found at s3://{self.bucket}/{key}") from exc
            if _status(exc)[1] == 416:  # an empty object has no byte 0
                return b""
            raise self._fail(f"cannot read object {digest} at", key, exc) from exc
        with body:
            return bytes(body.read())[:n]

    def exists(self, digest: str) -> bool:
        return self._head(self.key(object_key(digest))) is not None

    def size(self, digest: str) -> int:
        head = self._head(self.key(object_key(digest)))
        if head is None:
            raise ObjectNotFoundError(f"object {digest} not found at {self.uri(digest)}")
        return int(head["ContentLength"])

    def delete(self, digest: str) -> bool:
        key = self.key(object_key(digest))
        if self._head(key) is None:
            return False
        self.client.delete_object(Bucket=self.bucket, Key=key)
        return True

    def _list(self, relative_prefix: str) -> Iterator[dict[str, Any]]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.key(relative_prefix))
        for page in pages:
            yield from page.get("Contents", [])

    def iter_objects(self) -> Iterator[ObjectInfo]:
        for item in self._list(OBJECTS_PREFIX):
            digest = digest_of_key(item["Key"][len(self.prefix) :])
            if digest is not None:
                yield ObjectInfo(digest, int(item["Size"]))

    def uri(self, digest: str) -> str:
        return f"s3://{self.bucket}/{self.key(object_key(digest))}"

    def arrow_filesystem(self) -> pafs.FileSystem:
        options: dict[str, Any] = {"region": self.region}
        credentials = self._session.get_credentials()
        if credentials is not None:
            frozen = credentials.get_frozen_credentials()
            options.update(access_key=frozen.access_key, secret_key=frozen.secret_key, session_token=frozen.token)
        if self.endpoint_url:
            url = urlparse(self.endpoint_url)
            options.update(endpoint_override=url.netloc, scheme=url.scheme or "https")
        return pafs.S3FileSystem(**options)

    def arrow_path(self, digest: str) -> str:
        return f"{self.bucket}/{self.key(object_key(digest))}"

    # -- staging --------------------------------------------------------
    def _staged_key(self, attempt_id: str, name: str) -> str:
        return self.key(f"{STAGING_PREFIX}{check_attempt(attempt_id)}/{check_name(name)}")

    def _stage(self, attempt_id: str, name: str, stream: BinaryIO) -> str:
        key = self._staged_key(attempt_id, name)
        with self._seekable(stream) as (body, start, digest, size):
            body.seek(start)
            try:
                self._upload_stream(key, body, size, {})
            except ClientError as exc:
                raise self._fail(f"cannot stage {name!r} of attempt {attempt_id} at", key, exc) from exc
        return digest

    def open_staged(self, attempt_id: str, name: str) -> BinaryIO:
        return self._get_body(self._staged_key(attempt_id, name), f"staged part {name!r} of attempt {attempt_id}")

    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        base = f"{STAGING_PREFIX}{check_attempt(attempt_id)}/"
        cut = len(self.prefix) + len(base)
        items = [StagedObject(i["Key"][cut:], int(i["Size"]), i["LastModified"]) for i in self._list(base)]
        return sorted(items, key=lambda o: o.name)

    def delete_staged(self, attempt_id: str, name: str) -> bool:
        key = self._staged_key(attempt_id, name)
        if self._head(key) is None:
            return False
        self.client.delete_object(Bucket=self.bucket, Key=key)
        return True

    def promote(self, attempt_id: str, name: str) -> str:
        source = self._staged_key(attempt_id, name)
        what = f"staged part {name!r} of attempt {attempt_id}"
        head = self._head(source)
        if head is None:
            raise ObjectNotFoundError(f"{what} not found at s3://{self.bucket}/{source}")
        etag = str(head["ETag"])
        try:
            found = self._hash_key(source, IfMatch=etag)
        except ClientError as exc:
            raise self._fail(f"{what} changed or vanished while promoting; retry:", source, exc) from exc
        if found is None:
            raise ObjectNotFoundError(f"{what} vanished while promoting from s3://{self.bucket}/{source}")
        digest, size = found
        key = self.key(object_key(digest))

        def parts(upload_id: str) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            for n, start in enumerate(range(0, size, self.part_size), 1):
                byte_range = f"bytes={start}-{min(start + self.part_size, size) - 1}"
                try:
                    result = self.client.upload_part_copy(
                        Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, CopySourceRange=byte_range,
                        CopySource={"Bucket": self.bucket, "Key": source}, CopySourceIfMatch=etag,
                    )
                except ClientError as exc:  # a 412 here is the source changing, not the target existing
                    raise self._fail(f"cannot copy {what} from", source, exc) from exc
                out.append({"ETag": result["CopyPartResult"]["ETag"], "PartNumber": n})
            return out

        def upload(cond: dict[str, str]) -> None:
            if size == 0:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=b"", **cond)
            else:
                self._multipart(key, parts, cond)

        return self._create(digest, upload)

    def abandon(self, attempt_id: str) -> int:
        keys = [item["Key"] for item in self._list(f"{STAGING_PREFIX}{check_attempt(attempt_id)}/")]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            result = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            if result.get("Errors"):
                first = result["Errors"][0]
                raise ObjectStoreError(f"cannot abandon attempt {attempt_id}: s3://{self.bucket}/{first['Key']}: {first.get('Message')}")
        return len(keys)

    def list_staging(self) -> list[StagingAttempt]:
        found: dict[str, StagingAttempt] = {}
        cut = len(self.prefix) + len(STAGING_PREFIX)
        for item in self._list(STAGING_PREFIX):
            attempt = item["Key"][cut:].split("/", 1)[0]
            seen = found.get(attempt)
            modified, size = item["LastModified"], int(item["Size"])
            if seen is None:
                found[attempt] = StagingAttempt(attempt, modified, 1, size)
            else:
                found[attempt] = StagingAttempt(attempt, max(seen.last_modified, modified), seen.object_count + 1, seen.total_size + size)
        return [found[a] for a in sorted(found)]


__all__ = ["S3ObjectStore"]
