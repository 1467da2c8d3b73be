"""Privacy deletion planning: which descendants of a subject get which one outcome, and why (pure).

A subject is never logged or stored raw (:func:`subject_key_hash`, a salted SHA-256, keyed with HMAC by a key held apart);
:func:`plan_deletion` gives each descendant exactly one outcome:
CRYPTO_ERASED, DELETED, ANONYMIZED or RETAINED (under a named legal basis).

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import enum
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ConfigurationError


class DescendantKind(enum.Enum):
    RAW_OBJECT = "raw_object"
    RAW_BATCH = "raw_batch"  # a landed source batch (id: its object digest), read through the landing zone
    CANONICAL_ROWS = "canonical_rows"
    PARTITION_OBJECT = "partition_object"
    SPLIT_ROWS = "split_rows"
    REALIZATION = "realization"
    CACHE = "cache"


class Outcome(enum.Enum):
    DELETED = "deleted"
    CRYPTO_ERASED = "crypto_erased"
    ANONYMIZED = "anonymized"
    RETAINED = "retained"


OBJECT_KINDS = frozenset({DescendantKind.RAW_OBJECT, DescendantKind.PARTITION_OBJECT, DescendantKind.SPLIT_ROWS, DescendantKind.CACHE})


def subject_key_hash(salt: bytes, subject_key: str, key: bytes | None = None) -> str:
    """What stands for a subject key everywhere the platform records it: the salted SHA-256, keyed (:func:`keyed_hash`) when ``key`` is given."""
    if not isinstance(subject_key, str) or not subject_key:
        raise ConfigurationError(f"a subject key must be non-empty text, got {subject_key!r}")
    salted = hashlib.sha256(b"dsv-subject:" + salt + b":" + subject_key.encode()).hexdigest()
    return salted if key is None else keyed_hash(key, salted)


def keyed_hash(key: bytes, salted: str) -> str:
    """HMAC-SHA256 under ``key`` of a salted subject hash: computable from a stored salted hash, so old records convert in place."""
    return hmac.new(key, b"dsv-subject-keyed:" + salted.encode(), hashlib.sha256).hexdigest()


def subject_key_id(key: bytes) -> str:
    """A short public name of a subject-hash key (the registry records it; a different key is refused)."""
    return hmac.new(key, b"dsv-subject-key-id", hashlib.sha256).hexdigest()[:16]


@dataclass(frozen=True, order=True)
class Descendant:
    """Something that holds (or is built from) the subject's rows."""

    kind: DescendantKind = field(compare=False)
    id: str
    manifest_hash: str | None = None
    dataset: str | None = None
    encrypted: bool = False
    rows: int = 0

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.kind.value, self.id)


@dataclass(frozen=True)
class Decision:
    descendant: Descendant
    outcome: Outcome
    legal_basis: str | None
    why: str

    def to_document(self) -> dict[str, object]:
        d = self.descendant
        return {
            "kind": d.kind.value,
            "id": d.id,
            "manifest_hash": d.manifest_hash,
            "dataset": d.dataset,
            "rows": d.rows,
            "outcome": self.outcome.value,
            "legal_basis": self.legal_basis,
            "why": self.why,
        }


def decision_from_document(doc: Mapping[str, object]) -> Decision:
    """A :class:`Decision` from :meth:`Decision.to_document` (plus ``encrypted``), as the registry records a plan."""
    descendant = Descendant(
        DescendantKind(str(doc["kind"])),
        str(doc["id"]),
        None if doc.get("manifest_hash") is None else str(doc["manifest_hash"]),
        None if doc.get("dataset") is None else str(doc["dataset"]),
        bool(doc.get("encrypted", False)),
        int(str(doc.get("rows") or 0)),
    )
    basis = doc.get("legal_basis")
    return Decision(descendant, Outcome(str(doc["outcome"])), None if basis is None else str(basis), str(doc.get("why", "")))


@dataclass(frozen=True)
class DeletionPlan:
    """What a deletion will do; ``plan_hash`` identifies it (apply refuses a stale plan)."""

    subject_key_hash: str
    reason: str
    decisions: tuple[Decision, ...]
    based_on_generation: int

    @property
    def plan_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document(with_hash=False))

    def by_outcome(self, outcome: Outcome) -> list[Decision]:
        return [d for d in self.decisions if d.outcome is outcome]

    @property
    def affected_realizations(self) -> list[str]:
        return sorted({d.descendant.id for d in self.decisions if d.descendant.kind is DescendantKind.REALIZATION and d.outcome is not Outcome.RETAINED})

    def to_document(self, *, with_hash: bool = True) -> dict[str, object]:
        doc: dict[str, object] = {
            "subject_key_hash": self.subject_key_hash,
            "reason": self.reason,
            "based_on_generation": self.based_on_generation,
            "decisions": [d.to_document() for d in self.decisions],
            "counts": {o.value: len(self.by_outcome(o)) for o in Outcome},
        }
        if with_hash:
            doc["plan_hash"] = self.plan_hash
        return doc


def parse_legal_bases(items: Iterable[str]) -> dict[DescendantKind, str]:
    """``KIND=BASIS`` pairs (``raw_object=AML record keeping, 5 years``) into a map; unknown kinds are refused."""
    out: dict[DescendantKind, str] = {}
    names = {k.value: k for k in DescendantKind}
    for item in items:
        kind, sep, basis = item.partition("=")
        if not sep or kind.strip() not in names or not basis.strip():
            raise ConfigurationError(f"bad legal basis {item!r}: use KIND=BASIS with KIND one of {sorted(names)}")
        out[names[kind.strip()]] = basis.strip()
    return out


def decide(descendant: Descendant, retain: Mapping[DescendantKind, str]) -> Decision:
    basis = retain.get(descendant.kind)
    if basis is not None:
        return Decision(descendant, Outcome.RETAINED, basis, f"retained under the legal basis {basis!r}")
    if descendant.kind is DescendantKind.REALIZATION:
        return Decision(descendant, Outcome.DELETED, None, "built from the subject's rows: becomes REDACTED; its objects are erased")
    if descendant.kind is DescendantKind.CANONICAL_ROWS:
        return Decision(
            descendant,
            Outcome.DELETED,
            None,
            "rows in a canonical table: a row-level delete on the current snapshot (copy-on-write); older snapshots holding them "
            "are expired once no live realization pins them",
        )
    if descendant.kind is DescendantKind.RAW_BATCH and descendant.encrypted:
        why = "a raw landed batch encrypted under its own key: the key is destroyed and the landing index marks it redacted"
        return Decision(descendant, Outcome.CRYPTO_ERASED, None, why)
    if descendant.kind is DescendantKind.RAW_BATCH:
        return Decision(descendant, Outcome.DELETED, None, "a raw batch landed in the clear: its object is deleted and the landing index marks it redacted")
    if descendant.encrypted:
        return Decision(descendant, Outcome.CRYPTO_ERASED, None, "encrypted under its own key: the key is destroyed")
    return Decision(descendant, Outcome.DELETED, None, "stored in the clear: the object is deleted")


def plan_deletion(
    subject_hash: str, reason: str, descendants: Iterable[Descendant], *, retain: Mapping[DescendantKind, str] | None = None, generation: int = 0
) -> DeletionPlan:
    """One decision per distinct descendant, sorted; a realization retained keeps its objects too."""
    if not reason.strip():
        raise ConfigurationError("a privacy deletion needs a reason (e.g. 'GDPR art. 17 request #123')")
    retain = dict(retain or {})
    unique: dict[tuple[str, str], Descendant] = {}
    manifests: dict[tuple[str, str], set[str | None]] = {}
    for d in descendants:
        unique.setdefault(d.sort_key, d)
        manifests.setdefault(d.sort_key, set()).add(d.manifest_hash)
    kept_manifests = {d.id for d in unique.values() if d.kind is DescendantKind.REALIZATION and d.kind in retain}
    decisions = []
    for key in sorted(unique):
        d = unique[key]
        if d.kind in OBJECT_KINDS and manifests[key] & kept_manifests and d.kind not in retain:
            basis = retain[DescendantKind.REALIZATION]
            decisions.append(Decision(d, Outcome.RETAINED, basis, f"part of a realization retained under {basis!r}"))
        else:
            decisions.append(decide(d, retain))
    return DeletionPlan(subject_key_hash=subject_hash, reason=reason, decisions=tuple(decisions), based_on_generation=generation)


__all__ = [
    "Decision",
    "DeletionPlan",
    "Descendant",
    "DescendantKind",
    "Outcome",
    "decide",
    "decision_from_document",
    "keyed_hash",
    "parse_legal_bases",
    "plan_deletion",
    "subject_key_hash",
    "subject_key_id",
]
