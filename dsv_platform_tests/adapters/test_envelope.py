"""The segmented envelope (v2): streaming put/get through the encrypting store, tampering is CORRUPT, v1 objects stay readable."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.encrypted_store import STAGED_MAGIC, EncryptingObjectStore
from dsv_platform.adapters.objects.envelope import HEAD_BYTES, open_segments, seal_segments
from dsv_platform.adapters.objects.key_store import LocalKeyStore
from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.objects.object_store import object_key
from dsv_platform.adapters.objects.s3_store import S3ObjectStore
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.core.errors import ObjectErasedError, ObjectStoreError, ObjectVerificationError
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.s3_server import S3Server

MiB = 1024 * 1024
SEGMENT = 1024
TAG = 16
HEADER = 20
V1_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "envelope_v1"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make(root: Path, segment_size: int = SEGMENT) -> EncryptingObjectStore:
    inner = LocalObjectStore(root / "objects")
    return EncryptingObjectStore(inner, LocalObjectStore(root / "objects" / "encrypted"), LocalKeyStore(root / "keys"), segment_size=segment_size)


def sealed_path(store: EncryptingObjectStore, digest: str) -> Path:
    sealed = store.keys.sealed(digest)
    assert sealed is not None
    return store.sealed_store.path(sealed)  # type: ignore[attr-defined, no-any-return]


def rewrite(path: Path, change: Callable[[bytes], bytes]) -> None:
    os.chmod(path, 0o600)
    path.write_bytes(change(path.read_bytes()))


@pytest.mark.parametrize("size", [0, 1, SEGMENT - 1, SEGMENT, SEGMENT + 1, 3 * SEGMENT, 5 * SEGMENT + 7])
def test_envelope_roundtrip_at_segment_boundaries(tmp_path: Path, size: int) -> None:
    store = make(tmp_path)
    data = os.urandom(size)
    digest = store.put(data)
    assert digest == sha(data) and store.get(digest) == data and store.size(digest) == size
    segments = max(1, -(-size // SEGMENT))
    assert sealed_path(store, digest).stat().st_size == HEADER + size + TAG * segments
    assert [i.size for i in store.iter_objects()] == [size]


def test_envelope_streaming_apis_give_the_same_address(tmp_path: Path) -> None:
    store = make(tmp_path)
    data = os.urandom(7 * SEGMENT + 100)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    chunks = (data[i : i + 333] for i in range(0, len(data), 333))  # not seekable: spooled sealed, never in the clear
    assert store.put_chunks(chunks) == store.put_file(source) == store.put(data) == sha(data)
    out = tmp_path / "out" / "read.bin"
    out.parent.mkdir()
    assert store.get_file(sha(data), out) == len(data) and out.read_bytes() == data
    assert sorted(os.listdir(out.parent)) == ["read.bin"]
    with store.open(sha(data)) as stream:
        assert stream.read(10) == data[:10]


def test_envelope_writers_converge_and_promote_copies_the_staged_envelope(tmp_path: Path) -> None:
    a, b = make(tmp_path), make(tmp_path)
    data = os.urandom(4 * SEGMENT + 5)
    assert a.put(data) == b.put_chunks(iter([data]))
    first = sealed_path(a, sha(data)).read_bytes()
    a.stage("attempt-1", "part", data)
    staged = a.inner.get_staged("attempt-1", "part")
    assert staged.startswith(STAGED_MAGIC) and staged[len(STAGED_MAGIC) + 64 :] == first  # deterministic: one ciphertext
    assert a.get_staged("attempt-1", "part") == data
    assert a.promote("attempt-1", "part") == sha(data) and a.get(sha(data)) == data
    other = os.urandom(2 * SEGMENT)
    a.stage("attempt-1", "other", other)
    assert a.promote("attempt-1", "other") == sha(other) and a.get(sha(other)) == other
    assert sealed_path(a, sha(other)).read_bytes() == a.inner.get_staged("attempt-1", "other")[len(STAGED_MAGIC) + 64 :]


def test_envelope_source_changing_between_its_two_reads_stores_nothing(tmp_path: Path) -> None:
    store = make(tmp_path)
    data = os.urandom(3 * SEGMENT)

    class Changing(io.BytesIO):
        seeks = 0

        def seek(self, pos: int, whence: int = 0) -> int:
            self.seeks += 1
            if self.seeks == 1:  # rewound for the second pass, which reads other bytes than the first hashed
                self.getbuffer()[5] ^= 1
            return super().seek(pos, whence)

    with pytest.raises(ObjectStoreError, match="changed"):
        store.put(Changing(data))
    assert list(store.sealed_store.iter_objects()) == [] and store.keys.sealed(sha(data)) is None


def test_envelope_promotes_a_part_staged_in_the_clear(tmp_path: Path) -> None:
    store = make(tmp_path)
    data = os.urandom(2 * SEGMENT + 1)
    store.inner.stage("attempt-1", "clear", data)  # staged before staging was encrypted
    assert store.get_staged("attempt-1", "clear") == data
    assert store.promote("attempt-1", "clear") == sha(data) and store.is_encrypted(sha(data)) and store.get(sha(data)) == data


def test_envelope_platform_spools_under_its_home(tmp_path: Path) -> None:
    store = build_encrypted_store(load_settings({}).with_home(tmp_path))
    assert store.spool_dir == str(tmp_path.resolve() / "spool")
    data = os.urandom(3 * MiB)
    assert store.put_chunks(iter([data[:MiB], data[MiB:]])) == sha(data) and store.get(sha(data)) == data
    assert os.listdir(tmp_path / "spool") == []  # the spool is an unlinked temporary file


def _segments(blob: bytes) -> tuple[bytes, list[bytes]]:
    body = blob[HEADER:]
    return blob[:HEADER], [body[i : i + SEGMENT + TAG] for i in range(0, len(body), SEGMENT + TAG)]


TAMPERS: dict[str, Callable[[bytes], bytes]] = {
    "flipped byte": lambda b: b[:100] + bytes([b[100] ^ 1]) + b[101:],
    "truncated mid-segment": lambda b: b[: HEADER + 2 * (SEGMENT + TAG) + 10],
    "dropped last segment": lambda b: b"".join([_segments(b)[0], *_segments(b)[1][:-1]]),
    "swapped segments": lambda b: b"".join([_segments(b)[0], _segments(b)[1][1], _segments(b)[1][0], *_segments(b)[1][2:]]),
    "segment repeated": lambda b: b"".join([_segments(b)[0], _segments(b)[1][0], *_segments(b)[1][:-1]]),
    "bytes appended": lambda b: b + b"\x00" * 40,
    "header segment size": lambda b: b[:8] + (2 * SEGMENT).to_bytes(4, "big") + b[12:],
    "header only": lambda b: b[:HEADER],
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_envelope_tampering_is_corrupt(tmp_path: Path, tamper: str) -> None:
    store = make(tmp_path)
    data = os.urandom(4 * SEGMENT)  # four full segments: "dropped last segment" leaves a whole-segment object
    digest = store.put(data)
    rewrite(sealed_path(store, digest), TAMPERS[tamper])
    for verify in (True, False):  # without the plaintext re-hash too: the envelope alone catches it
        with pytest.raises(ObjectVerificationError, match=digest):
            store.get(digest, verify=verify)
    released = b""
    with pytest.raises(ObjectVerificationError), store.open(digest, verify=False) as stream:
        while chunk := stream.read(SEGMENT // 4):
            released += chunk
    assert data.startswith(released)  # a segment's bytes are handed on only once it authenticated


def test_envelope_tampered_staged_part_is_corrupt_and_not_promoted(tmp_path: Path) -> None:
    store = make(tmp_path)
    data = os.urandom(3 * SEGMENT)
    store.stage("attempt-1", "part", data)
    path = store.inner.root / "staging" / "attempt-1" / "part"  # type: ignore[attr-defined]
    rewrite(path, lambda b: b[: -(SEGMENT + TAG)])
    with pytest.raises(ObjectVerificationError, match="part"):
        store.get_staged("attempt-1", "part")
    with pytest.raises(ObjectVerificationError, match="part"):
        store.promote("attempt-1", "part")
    assert store.keys.sealed(sha(data)) is None and list(store.sealed_store.iter_objects()) == []


def test_envelope_crypto_erasure_covers_every_segment(tmp_path: Path) -> None:
    store = make(tmp_path)
    data = os.urandom(6 * SEGMENT)
    digest = store.put(data)
    blob = sealed_path(store, digest).read_bytes()
    assert store.erase(digest) is not None
    with pytest.raises(ObjectErasedError):
        store.get(digest)
    with pytest.raises(ObjectErasedError):
        store.put_chunks(iter([data]))
    with pytest.raises(ObjectVerificationError):  # the ciphertext that survives is noise without the destroyed key
        b"".join(open_segments(os.urandom(32), digest, io.BytesIO(blob[HEAD_BYTES:]), blob[:HEAD_BYTES], "erased"))


def test_envelope_segments_are_bound_to_their_object(tmp_path: Path) -> None:
    key = os.urandom(32)
    one, two = os.urandom(2 * SEGMENT), os.urandom(2 * SEGMENT)
    a = b"".join(seal_segments(key, sha(one), [one], SEGMENT))
    b = b"".join(seal_segments(key, sha(two), [two], SEGMENT))
    mixed = a[:HEADER] + b[HEADER : HEADER + SEGMENT + TAG] + a[HEADER + SEGMENT + TAG :]  # a segment of another object, same key
    with pytest.raises(ObjectVerificationError):
        b"".join(open_segments(key, sha(one), io.BytesIO(mixed[HEAD_BYTES:]), mixed[:HEAD_BYTES], "mixed"))


# -- objects written by the v1 envelope (fixtures/envelope_v1, made with commit d4a451d's code) ------------
V1_OBJECT = b"".join(f"account_id=acct-{i:05d};amount={i * 7 % 1000}.{i % 100:02d}\n".encode() for i in range(3000))
V1_PART = b"staged part written by the v1 envelope\n" * 50


@pytest.fixture
def v1_store(tmp_path: Path) -> EncryptingObjectStore:
    shutil.copytree(V1_FIXTURE, tmp_path / "v1")
    return make(tmp_path / "v1", segment_size=4 * 1024 * 1024)


def test_envelope_v1_objects_stay_readable(v1_store: EncryptingObjectStore, tmp_path: Path) -> None:
    digest, empty = sha(V1_OBJECT), sha(b"")
    assert v1_store.get(digest) == V1_OBJECT and v1_store.get(empty) == b""
    assert v1_store.size(digest) == len(V1_OBJECT) and v1_store.size(empty) == 0
    assert {i.digest: i.size for i in v1_store.iter_objects()} == {digest: len(V1_OBJECT), empty: 0}
    assert v1_store.get_file(digest, tmp_path / "v1.bin") == len(V1_OBJECT)
    assert v1_store.put(V1_OBJECT) == digest and v1_store.get(digest) == V1_OBJECT  # rewritten in v2, same address
    assert sealed_path(v1_store, digest).read_bytes().startswith(b"DSVSEG")


def test_envelope_v1_staged_part_promotes_and_erases(v1_store: EncryptingObjectStore) -> None:
    digest = sha(V1_PART)
    assert v1_store.staged_digest("attempt-v1", "part-0.parquet") == digest
    assert v1_store.get_staged("attempt-v1", "part-0.parquet") == V1_PART
    assert v1_store.promote("attempt-v1", "part-0.parquet") == digest and v1_store.get(digest) == V1_PART
    assert v1_store.erase(sha(V1_OBJECT)) is not None
    with pytest.raises(ObjectErasedError):
        v1_store.get(sha(V1_OBJECT))


def test_envelope_v1_tampered_object_is_corrupt(v1_store: EncryptingObjectStore) -> None:
    digest = sha(V1_OBJECT)
    rewrite(sealed_path(v1_store, digest), lambda b: b[:-1])
    with pytest.raises(ObjectVerificationError, match=digest):
        v1_store.get(digest, verify=False)


# -- over S3: the sealed store's put is a multipart upload, reads stream the GET body -------------------
@pytest.mark.s3
def test_envelope_over_s3_streams_and_detects_a_dropped_segment(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    def s3(prefix: str) -> S3ObjectStore:
        return S3ObjectStore(
            s3_bucket, prefix, endpoint_url=s3_server.endpoint_url, region=s3_server.region,
            access_key=s3_server.access_key, secret_key=s3_server.secret_key, multipart_threshold=8 * MiB, part_size=5 * MiB,
        )

    store = EncryptingObjectStore(s3("dsv"), s3("dsv/encrypted"), LocalKeyStore(tmp_path / "keys"))  # the default 4 MiB segments
    data = os.urandom(18 * MiB + 3)
    source = tmp_path / "source.bin"
    source.write_bytes(data)
    digest = store.put_file(source)
    assert digest == sha(data) == store.put_chunks(data[i : i + MiB] for i in range(0, len(data), MiB))
    assert store.size(digest) == len(data) and [(i.digest, i.size) for i in store.iter_objects()] == [(digest, len(data))]
    assert store.get_file(digest, tmp_path / "out.bin") == len(data) and (tmp_path / "out.bin").read_bytes() == data
    store.stage("attempt-1", "part", source)
    assert store.promote("attempt-1", "part") == digest and store.get(digest) == data

    sealed = store.keys.sealed(digest)
    assert sealed is not None
    client, key = s3_server.client(), store.sealed_store.key(object_key(sealed))  # type: ignore[attr-defined]
    blob = client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert len(blob) == HEADER + len(data) + 5 * TAG
    client.put_object(Bucket=s3_bucket, Key=key, Body=blob[: HEADER + 4 * (4 * MiB + TAG)])  # the short last segment dropped
    with pytest.raises(ObjectVerificationError, match=digest):
        store.get(digest, verify=False)
