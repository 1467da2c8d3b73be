"""One behaviour suite for every object store: local folder and S3 (the suite's moto server)."""

from __future__ import annotations

import hashlib
import io
import os
import threading
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.objects.object_store import ObjectInfo, ObjectStore, object_key
from dsv_platform.adapters.objects.s3_store import S3ObjectStore
from dsv_platform.bootstrap import build_object_store
from dsv_platform.core.errors import (
    ConfigurationError,
    ObjectConflictError,
    ObjectNotFoundError,
    ObjectStoreError,
    ObjectVerificationError,
)
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.s3_server import S3Server

MiB = 1024 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Backend:
    """A store plus raw access to its backing storage, bypassing the store (to simulate corruption)."""

    store: ObjectStore
    write_raw: Callable[[str, bytes], None]
    read_raw: Callable[[str], bytes]


def _local(tmp_path: Path) -> Backend:
    store = LocalObjectStore(tmp_path / "store")

    def write_raw(key: str, data: bytes) -> None:
        path = store.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            os.chmod(path, 0o644)
        path.write_bytes(data)

    return Backend(store, write_raw, lambda key: (store.root / key).read_bytes())


def _s3(server: S3Server, bucket: str) -> Backend:
    store = S3ObjectStore(
        bucket,
        f"dsv/{uuid.uuid4().hex[:8]}",
        endpoint_url=server.endpoint_url,
        region=server.region,
        access_key=server.access_key,
        secret_key=server.secret_key,
        multipart_threshold=8 * MiB,
        part_size=8 * MiB,
    )
    client = server.client()

    def write_raw(key: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=store.key(key), Body=data)

    def read_raw(key: str) -> bytes:
        return bytes(client.get_object(Bucket=bucket, Key=store.key(key))["Body"].read())

    return Backend(store, write_raw, read_raw)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return _local(tmp_path)
    server: S3Server = request.getfixturevalue("s3_server")
    return _s3(server, request.getfixturevalue("s3_bucket"))


@pytest.fixture
def store(backend: Backend) -> ObjectStore:
    return backend.store


# -- objects ------------------------------------------------------------------
def test_object_store_put_get_roundtrip(store: ObjectStore, tmp_path: Path) -> None:
    data = b"hello, content addressing\n" * 100
    digest = store.put(data)
    assert digest == sha(data)
    assert store.get(digest) == data
    assert store.exists(digest)
    assert store.size(digest) == len(data)
    assert store.verify(digest) == len(data)
    with store.open(digest) as stream:
        assert stream.read() == data
    file = tmp_path / "payload.bin"
    file.write_bytes(data)
    assert store.put(bytearray(data)) == store.put(io.BytesIO(data)) == store.put(file) == store.put(str(file)) == digest


def test_object_store_layout_is_two_hex_folder_and_62_hex_name(backend: Backend) -> None:
    data = b"layout"
    digest = backend.store.put(data)
    key = f"objects/sha256/{digest[:2]}/{digest[2:]}"
    assert object_key(digest) == key
    assert backend.read_raw(key) == data
    assert backend.store.uri(digest).endswith(key)


def test_object_store_empty_object(store: ObjectStore) -> None:
    digest = store.put(b"")
    assert digest == sha(b"")
    assert store.get(digest) == b""
    assert store.size(digest) == 0


def test_object_store_identical_put_is_noop(store: ObjectStore) -> None:
    data = os.urandom(4096)
    assert store.put(data) == store.put(data) == sha(data)
    assert list(store.iter_objects()) == [ObjectInfo(sha(data), 4096)]


def test_object_store_put_over_corrupt_object_conflicts_and_keeps_bytes(backend: Backend) -> None:
    data, bad = b"the real bytes", b"corrupted bytes"
    digest = sha(data)
    backend.write_raw(object_key(digest), bad)
    with pytest.raises(ObjectConflictError, match=digest):
        backend.store.put(data)
    assert backend.read_raw(object_key(digest)) == bad
    assert getattr(backend.store, "conditional_writes", True)  # S3: the 412 path, not the fallback


def test_object_store_get_detects_flipped_byte(backend: Backend) -> None:
    data = os.urandom(10_000)
    digest = backend.store.put(data)
    flipped = bytearray(data)
    flipped[5000] ^= 0x01
    backend.write_raw(object_key(digest), bytes(flipped))
    with pytest.raises(ObjectVerificationError, match=digest):
        backend.store.get(digest)
    with pytest.raises(ObjectVerificationError, match=digest):
        backend.store.verify(digest)
    with pytest.raises(ObjectVerificationError, match=digest), backend.store.open(digest) as stream:
        while stream.read(1000):
            pass
    assert backend.store.get(digest, verify=False) == bytes(flipped)


def test_object_store_missing_object_is_not_found(store: ObjectStore) -> None:
    digest = sha(b"never stored")
    assert not store.exists(digest)
    with pytest.raises(ObjectNotFoundError, match=digest):
        store.get(digest)
    with pytest.raises(ObjectNotFoundError, match=digest):
        store.size(digest)


@pytest.mark.parametrize("digest", ["ABC", "0" * 63, "G" * 64, "A" * 64, "../" + "0" * 61])
def test_object_store_rejects_malformed_digest(store: ObjectStore, digest: str) -> None:
    with pytest.raises(ObjectStoreError, match="digest"):
        store.get(digest)


def test_object_store_iter_objects_lists_only_objects(backend: Backend) -> None:
    store = backend.store
    blobs = [b"a", b"bb", b"ccc"]
    for blob in blobs:
        store.put(blob)
    store.stage("attempt-1", "part-0", b"staged, not an object")
    backend.write_raw("objects/sha256/zz/not-a-digest", b"foreign")
    assert list(store.iter_objects()) == sorted(ObjectInfo(sha(b), len(b)) for b in blobs)


def test_object_store_delete(store: ObjectStore) -> None:
    digest = store.put(b"garbage")
    assert store.delete(digest) is True
    assert not store.exists(digest)
    assert store.delete(digest) is False
    with pytest.raises(ObjectNotFoundError):
        store.get(digest)
    assert list(store.iter_objects()) == []
    assert store.put(b"garbage") == digest  # the key can be created again after GC


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=3000))
def test_object_store_roundtrip_any_bytes(store: ObjectStore, data: bytes) -> None:
    digest = store.put(data)
    assert digest == sha(data)
    assert store.get(digest) == data


# -- staging ------------------------------------------------------------------
def test_object_store_staging_lifecycle(store: ObjectStore) -> None:
    attempt = f"build-{uuid.uuid4().hex[:8]}"
    before = datetime.now(UTC) - timedelta(seconds=5)
    store.stage(attempt, "part-0.parquet", b"first draft")
    assert store.stage(attempt, "part-0.parquet", b"part zero") == sha(b"part zero")  # rewritable until promoted
    store.stage(attempt, "nested/part-1.parquet", io.BytesIO(b"part one"))
    store.stage("other-attempt", "x", b"x")

    assert [(o.name, o.size) for o in store.list_staged(attempt)] == [("nested/part-1.parquet", 8), ("part-0.parquet", 9)]
    assert store.get_staged(attempt, "nested/part-1.parquet") == b"part one"
    attempts = {a.attempt_id: a for a in store.list_staging()}
    assert set(attempts) == {attempt, "other-attempt"}
    assert (attempts[attempt].object_count, attempts[attempt].total_size) == (2, 17)
    assert before <= attempts[attempt].last_modified <= datetime.now(UTC) + timedelta(seconds=5)

    digest = store.promote(attempt, "part-0.parquet")
    assert digest == sha(b"part zero")
    assert store.get(digest) == b"part zero"
    assert store.promote(attempt, "part-0.parquet") == digest  # idempotent
    assert list(store.iter_objects()) == [ObjectInfo(digest, 9)]

    assert store.delete_staged(attempt, "nested/part-1.parquet") is True
    assert store.delete_staged(attempt, "nested/part-1.parquet") is False
    assert store.abandon(attempt) == 1
    assert store.list_staged(attempt) == []
    assert [a.attempt_id for a in store.list_staging()] == ["other-attempt"]
    assert store.get(digest) == b"part zero"  # promoted objects outlive their staging
    assert store.abandon(attempt) == 0


def test_object_store_promote_missing_part_is_not_found(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError, match="part-9"):
        store.promote("attempt-1", "part-9")
    with pytest.raises(ObjectNotFoundError, match="part-9"):
        store.get_staged("attempt-1", "part-9")


def test_object_store_promote_over_corrupt_object_conflicts(backend: Backend) -> None:
    data = b"staged part bytes"
    backend.write_raw(object_key(sha(data)), b"rot")
    backend.store.stage("attempt-1", "part", data)
    with pytest.raises(ObjectConflictError, match=sha(data)):
        backend.store.promote("attempt-1", "part")
    assert backend.read_raw(object_key(sha(data))) == b"rot"


@pytest.mark.parametrize(("attempt", "name"), [("a/b", "x"), ("", "x"), ("..", "x"), ("ok", "../x"), ("ok", "/abs"), ("ok", "a//b"), ("ok", "")])
def test_object_store_staging_rejects_unsafe_names(store: ObjectStore, attempt: str, name: str) -> None:
    with pytest.raises(ObjectStoreError):
        store.stage(attempt, name, b"x")


# -- large objects, concurrency, readers --------------------------------------
@pytest.fixture
def large_file(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    path = tmp_path / "large.bin"
    h = hashlib.sha256()
    with open(path, "wb") as out:
        for _ in range(20):
            chunk = os.urandom(MiB)
            h.update(chunk)
            out.write(chunk)
    yield path, h.hexdigest()


def test_object_store_large_object_streams(store: ObjectStore, large_file: tuple[Path, str]) -> None:
    path, expected = large_file
    tracemalloc.start()
    try:
        assert store.put_file(path) == expected
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * MiB, f"put_file held {peak} bytes at once: it must stream, not read the file whole"
    assert store.size(expected) == 20 * MiB
    h = hashlib.sha256()
    with store.open(expected) as stream:
        while chunk := stream.read(MiB):
            h.update(chunk)
    assert h.hexdigest() == expected
    store.stage("big-attempt", "large.bin", path)
    assert store.delete(expected)
    assert store.promote("big-attempt", "large.bin") == expected  # S3: multipart server-side copy
    assert store.verify(expected) == 20 * MiB


def test_object_store_streaming_put_and_get(store: ObjectStore, large_file: tuple[Path, str], tmp_path: Path) -> None:
    path, expected = large_file

    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while chunk := f.read(3 * MiB + 17):
                yield chunk

    assert store.put_chunks(chunks()) == expected == store.put_chunks(chunks())  # S3: a multipart upload (20 MiB > 8 MiB)
    assert store.put_chunks(iter([])) == sha(b"")
    out = tmp_path / "read-back.bin"
    assert store.get_file(expected, out) == 20 * MiB
    assert hashlib.sha256(out.read_bytes()).hexdigest() == expected
    assert store.read_head(expected, 10) == path.read_bytes()[:10] and store.read_head(sha(b""), 10) == b""


def test_object_store_get_file_leaves_nothing_on_a_corrupt_object(backend: Backend, tmp_path: Path) -> None:
    data = os.urandom(10_000)
    digest = backend.store.put(data)
    backend.write_raw(object_key(digest), data[:-1] + bytes([data[-1] ^ 1]))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ObjectVerificationError, match=digest):
        backend.store.get_file(digest, out / "object.bin")
    assert os.listdir(out) == []


def test_object_store_concurrent_writers_converge(store: ObjectStore) -> None:
    data = os.urandom(2 * MiB)
    writers = 8
    barrier = threading.Barrier(writers)
    results: list[str] = []
    errors: list[BaseException] = []

    def write() -> None:
        barrier.wait()
        try:
            results.append(store.put(data))
        except BaseException as exc:  # collected and re-raised by the test
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [sha(data)] * writers
    assert list(store.iter_objects()) == [ObjectInfo(sha(data), len(data))]
    assert store.get(sha(data)) == data
    if isinstance(store, LocalObjectStore):
        assert os.listdir(store.root / "tmp") == []


def test_object_store_parquet_readable_by_pyarrow(store: ObjectStore) -> None:
    table = pa.table({"id": pa.array(range(1000), pa.int64()), "label": pa.array([f"row-{i}" for i in range(1000)])})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    digest = store.put(sink.getvalue())
    read = pq.read_table(store.arrow_path(digest), filesystem=store.arrow_filesystem())
    assert read.equals(table)


# -- backend specifics --------------------------------------------------------
@pytest.mark.s3
def test_s3_object_store_without_conditional_writes_still_write_once(s3_server: S3Server, s3_bucket: str) -> None:
    backend = _s3(s3_server, s3_bucket)
    backend.store.conditional_writes = False  # type: ignore[attr-defined]  # head-then-put path
    data = b"fallback path"
    assert backend.store.put(data) == backend.store.put(data) == sha(data)
    other = b"other bytes"
    backend.write_raw(object_key(sha(other)), b"rot")
    with pytest.raises(ObjectConflictError, match=sha(other)):
        backend.store.put(other)
    assert backend.read_raw(object_key(sha(other))) == b"rot"


def test_build_object_store_local(tmp_path: Path) -> None:
    store = build_object_store(load_settings({}).with_home(tmp_path))
    assert isinstance(store, LocalObjectStore)
    assert store.root == (tmp_path / "objects").resolve()
    assert store.get(store.put(b"x")) == b"x"


@pytest.mark.s3
def test_build_object_store_s3(s3_env: S3Server, s3_bucket: str) -> None:
    settings = load_settings({"DSV_OBJECT_STORE": f"s3://{s3_bucket}/team/objects", "DSV_S3_ENDPOINT_URL": s3_env.endpoint_url})
    store = build_object_store(settings)
    assert isinstance(store, S3ObjectStore)
    assert store.location == f"s3://{s3_bucket}/team/objects"
    digest = store.put(b"via settings")
    assert store.uri(digest) == f"s3://{s3_bucket}/team/objects/{object_key(digest)}"
    assert store.get(digest) == b"via settings"


def test_build_object_store_rejects_s3_url_without_bucket() -> None:
    with pytest.raises(ConfigurationError, match="bucket"):
        build_object_store(load_settings({"DSV_OBJECT_STORE": "s3:///prefix"}))
