"""Copy everything a key store holds into another, then verify it (`dsv keys copy`: a key folder to PostgreSQL).

The keys, the erasure tombstones (an erased digest stays erased: it is never given a key), the ciphertext bindings,
the deletion records, the redaction generation and the salt (byte-identical: subject hashes depend on it). The source
is only read. A target that already holds anything the source does not hold identically is refused before anything
is written (ObjectConflictError); a target holding a subset (a copy a crash interrupted) is completed, so a rerun is
idempotent. The salt goes first, the generation last, each entry keeps its creation time (the integrity scan's window
counts from it); then the target is read back and compared with the source (KeyCopyMismatchError naming what differs).

Details: docs/gc-and-privacy.md, "Moving the keys to another key store"
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime

from dsv_platform.adapters.objects.key_store import KeyStore
from dsv_platform.core.errors import KeyCopyMismatchError, ObjectConflictError, ObjectErasedError

Deletion = tuple[int, str, str]


@dataclass(frozen=True)
class KeySet:
    """Everything one key store holds, as the KeyStore interface reads it."""

    keys: dict[str, bytes]
    erased: frozenset[str]
    bindings: dict[str, str]
    deletions: tuple[Deletion, ...]
    generation: int
    salt: bytes | None
    made: dict[str, datetime] = field(default_factory=dict, compare=False)
    """When each entry was made (its ``bindings`` time): copied with it, not part of what the check compares."""

    @property
    def empty(self) -> bool:
        """Nothing here can depend on the salt: no key, erasure, binding or deletion, generation 0."""
        return not (self.keys or self.erased or self.bindings or self.deletions or self.generation)

    def counts(self) -> dict[str, int]:
        return {"keys": len(self.keys), "erased": len(self.erased), "bindings": len(self.bindings), "deletions": len(self.deletions)}

    def digest(self) -> str:
        """sha256 over every entry (keys, erased, bindings, deletions, generation, salt): equal digests, equal sets."""
        doc = {
            "keys": {d: k.hex() for d, k in sorted(self.keys.items())},
            "erased": sorted(self.erased),
            "bindings": dict(sorted(self.bindings.items())),
            "deletions": [list(d) for d in self.deletions],
            "generation": self.generation,
            "salt": None if self.salt is None else self.salt.hex(),
        }
        return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def read_set(store: KeyStore) -> KeySet:
    """What ``store`` holds, without writing to it (a key a crash left zeroed reads as erased, as ``key`` says)."""
    keys: dict[str, bytes] = {}
    erased = set(store.erased())
    for digest in store.digests():
        try:
            key = store.key(digest)
        except ObjectErasedError:
            erased.add(digest)
            continue
        if key is not None:
            keys[digest] = key
    entries = store.bindings()
    bindings = {d: s for d, s, _ in entries if s is not None}
    made = {d: when for d, _, when in entries if when is not None}
    return KeySet(keys, frozenset(erased), bindings, tuple(sorted(store.deletions())), store.generation(), store.stored_salt(), made)


def _first(items: object) -> str:
    found = sorted(items)  # type: ignore[call-overload]
    return f"{len(found)}, first {found[0]}" if found else "0"


def differences(source: KeySet, target: KeySet, *, subset: bool) -> list[str]:
    """What ``target`` holds that ``source`` does not (``subset``: a partial copy allowed), else every difference."""
    out = []
    keys = {d for d, k in target.keys.items() if source.keys.get(d) != k} | (set() if subset else source.keys.keys() - target.keys.keys())
    if keys:
        out.append(f"keys ({_first(keys)})")
    for name, mine, theirs in (
        ("erased", source.erased, target.erased),
        ("bindings", set(source.bindings.items()), set(target.bindings.items())),
        ("deletions", set(source.deletions), set(target.deletions)),
    ):
        extra = set(theirs) - set(mine) | (set() if subset else set(mine) - set(theirs))
        if extra:
            out.append(f"{name} ({_first(str(e) for e in extra)})")
    if target.generation != source.generation and not (subset and target.generation == 0):
        out.append(f"generation (source {source.generation}, target {target.generation})")
    if source.salt is not None and target.salt != source.salt and not (subset and (target.salt is None or target.empty)):
        out.append("salt (the bytes differ)")  # a source that never made its salt hashed no subject: any target salt fits
    return out


@dataclass(frozen=True)
class CopyReport:
    counts: dict[str, int]
    generation: int
    digest: str
    written: int


def copy_keys(source: KeyStore, target: KeyStore, *, source_name: str, target_name: str) -> CopyReport:
    """Copy ``source`` into ``target`` and verify (see the module docstring)."""
    have, held = read_set(source), read_set(target)
    refused = differences(have, held, subset=True)
    if refused:
        raise ObjectConflictError(
            f"the target key store {target_name} already holds entries the source {source_name} does not hold identically: "
            f"{'; '.join(refused)}; nothing was copied (copy into an empty key store)"
        )
    written = 0
    if have.salt is not None:
        written += target.import_salt(have.salt)
    for digest in sorted(have.keys.keys() | have.erased | have.bindings.keys()):
        wanted = (have.keys.get(digest), have.bindings.get(digest), digest in have.erased)
        if (held.keys.get(digest), held.bindings.get(digest), digest in held.erased) != wanted:
            written += target.import_entry(digest, key=wanted[0], sealed=wanted[1], erased=wanted[2], made=have.made.get(digest))
    for generation, request_id, subject_hash in have.deletions:
        if (generation, request_id, subject_hash) not in held.deletions:
            target.record_deletion(generation, request_id, subject_hash)
            written += 1
    if held.generation != have.generation:
        target.set_generation(have.generation)
        written += 1
    now, copied = read_set(source), read_set(target)
    mismatch = differences(now, copied, subset=False)
    if mismatch:
        raise KeyCopyMismatchError(
            f"the key store copied to {target_name} differs from the source {source_name} read back after the copy: {'; '.join(mismatch)} "
            "(was the platform writing during the copy? stop it and rerun)"
        )
    return CopyReport(now.counts(), now.generation, now.digest(), written)


__all__ = ["CopyReport", "KeySet", "copy_keys", "differences", "read_set"]
