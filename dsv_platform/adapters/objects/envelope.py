"""The envelopes a sealed object is stored in: v1 (one AES-GCM message, read only) and v2 (fixed-size AES-GCM segments).

v2 is written and read one segment at a time, so neither a write nor a read holds a whole object;
each segment's index, the final-segment flag, the header and the plaintext digest are authenticated,
so truncation, reordering, swapping and any flipped byte fail as ObjectVerificationError (CORRUPT).

Details: docs/storage.md
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dsv_platform.core.errors import ObjectVerificationError

NONCE_BYTES = 12
TAG_BYTES = 16
V1_OVERHEAD = NONCE_BYTES + TAG_BYTES
V2_MAGIC = b"DSVSEG\x00\x02"
SEGMENT_SIZE = 4 * 1024 * 1024
_HEADER = struct.Struct(">8sI8s")  # magic, segment size, nonce prefix
HEADER_BYTES = _HEADER.size
HEAD_BYTES = max(HEADER_BYTES, NONCE_BYTES)
"""How many leading bytes tell the envelope's version (and, for v2, its segment size)."""
_MAX_SEGMENTS = 2**32


# -- v1: nonce || AES-GCM(whole plaintext), bound to the digest (kept to read objects written before v2)
def nonce_for(key: bytes, digest: str) -> bytes:
    return hmac.new(key, b"dsv-object-nonce:" + digest.encode(), hashlib.sha256).digest()[:NONCE_BYTES]


def seal(key: bytes, digest: str, plaintext: bytes) -> bytes:
    """The v1 envelope, ``nonce || AES-GCM(plaintext)`` bound to ``digest`` (no longer written by the store)."""
    nonce = nonce_for(key, digest)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, digest.encode())


def unseal(key: bytes, digest: str, sealed: bytes) -> bytes:
    """The plaintext of a v1 envelope; InvalidTag if the key, the digest or the ciphertext is wrong."""
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], digest.encode())


def is_v1(key: bytes, digest: str, head: bytes) -> bool:
    """True if ``head`` (the envelope's first bytes) starts a v1 envelope of ``digest`` under ``key``: its nonce is derived."""
    return head[:NONCE_BYTES] == nonce_for(key, digest)


# -- v2: header || segment_0 || ... || segment_n-1, each AES-GCM(plaintext[i*S:(i+1)*S]) with its tag
def _prefix(key: bytes, digest: str) -> bytes:
    # A key encrypts one plaintext (its digest's), so a nonce derived from (key, digest, index) never
    # meets a second message; writers racing on one object produce identical ciphertext.
    return hmac.new(key, b"dsv-object-nonce/2:" + digest.encode(), hashlib.sha256).digest()[:8]


def _aad(header: bytes, digest: str, index: int, final: bool) -> bytes:
    return header + digest.encode() + struct.pack(">IB", index, 1 if final else 0)


def _rechunk(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """The bytes of ``chunks`` cut into pieces of exactly ``size`` (the last may be shorter; at least one piece)."""
    pending = bytearray()
    yielded = False
    for chunk in chunks:
        view = memoryview(chunk)
        if pending:
            take = size - len(pending)
            pending += view[:take]
            view = view[take:]
            if len(pending) < size:
                continue
            yield bytes(pending)
            pending.clear()
            yielded = True
        while len(view) >= size:
            yield bytes(view[:size])
            view = view[size:]
            yielded = True
        pending += view
    if pending or not yielded:
        yield bytes(pending)


def seal_segments(
    key: bytes, digest: str, chunks: Iterable[bytes], segment_size: int = SEGMENT_SIZE, *, check: bool = False
) -> Iterator[bytes]:
    """The v2 envelope of the plaintext ``chunks`` (whose SHA-256 is ``digest``): the header, then one sealed segment at a time.

    With ``check``, each segment is decrypted again and compared with its plaintext before it is handed on.
    """
    if not 0 < segment_size < 2**31:
        raise ValueError(f"segment size {segment_size} out of range")
    prefix = _prefix(key, digest)
    header = _HEADER.pack(V2_MAGIC, segment_size, prefix)
    aead = AESGCM(key)

    def sealed(piece: bytes, index: int, final: bool) -> bytes:
        nonce, aad = prefix + struct.pack(">I", index), _aad(header, digest, index, final)
        out = aead.encrypt(nonce, piece, aad)
        if check and aead.decrypt(nonce, out, aad) != piece:
            raise ObjectVerificationError(f"object {digest}: encrypted segment {index} does not decrypt to what was written")
        return out

    yield header
    pieces = _rechunk(chunks, segment_size)
    current = next(pieces)
    index = 0
    for following in pieces:
        yield sealed(current, index, False)
        current, index = following, index + 1
        if index >= _MAX_SEGMENTS:
            raise ValueError(f"object {digest}: more than {_MAX_SEGMENTS} segments")
    yield sealed(current, index, True)


def parse_header(head: bytes) -> tuple[int, bytes] | None:
    """``(segment size, nonce prefix)`` of a v2 header, None if ``head`` does not start one."""
    if len(head) < HEADER_BYTES or not head.startswith(V2_MAGIC):
        return None
    _, segment_size, prefix = _HEADER.unpack(head[:HEADER_BYTES])
    return (segment_size, prefix) if segment_size > 0 else None


def v2_plaintext_size(sealed_size: int, segment_size: int) -> int:
    """The plaintext size of a v2 envelope of ``sealed_size`` bytes (every segment adds one tag; there is at least one)."""
    body = sealed_size - HEADER_BYTES
    segments = max(1, -(-body // (segment_size + TAG_BYTES)))
    return max(0, body - segments * TAG_BYTES)


def read_exactly(stream: BinaryIO, n: int) -> bytes:
    parts, remaining = [], n
    while remaining:
        data = stream.read(remaining)
        if not data:
            break
        parts.append(data)
        remaining -= len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def open_segments(key: bytes, digest: str, stream: BinaryIO, head: bytes, where: str) -> Iterator[bytes]:
    """The plaintext of a v2 envelope whose first ``HEAD_BYTES`` are ``head`` and the rest is ``stream``, one authenticated segment at a time."""
    parsed = parse_header(head)
    if parsed is None:
        raise ObjectVerificationError(f"{where}: not a sealed envelope (unknown header)")
    segment_size, prefix = parsed
    header, aead = head[:HEADER_BYTES], AESGCM(key)
    span = segment_size + TAG_BYTES
    current = head[HEADER_BYTES:] + read_exactly(stream, span - (len(head) - HEADER_BYTES))
    index = 0
    while True:
        following = read_exactly(stream, span) if len(current) == span else b""
        final = not following
        if len(current) < TAG_BYTES or index >= _MAX_SEGMENTS:
            raise ObjectVerificationError(f"{where}: truncated (segment {index} is missing or cut short)")
        try:
            yield aead.decrypt(prefix + struct.pack(">I", index), current, _aad(header, digest, index, final))
        except InvalidTag as exc:
            what = "the last segment is missing, or the object is truncated" if final else "a segment is altered, moved or swapped"
            raise ObjectVerificationError(f"{where}: segment {index} does not authenticate under its key ({what})") from exc
        if final:
            return
        current, index = following, index + 1


__all__ = [
    "HEAD_BYTES",
    "SEGMENT_SIZE",
    "V1_OVERHEAD",
    "is_v1",
    "open_segments",
    "parse_header",
    "read_exactly",
    "seal",
    "seal_segments",
    "unseal",
    "v2_plaintext_size",
]
