"""Roles, grants and the audit chain: the pure rules of the trust model (docs/trust.md).

A :class:`Grant` gives one identity one :class:`Role`, optionally narrowed to a
definition, a source, a purpose and restricted columns. :func:`grant_covers`
decides whether a grant allows a request. Audit entries are hash-chained:
:func:`audit_entry_hash` hashes an entry's fields with the previous entry's hash,
and :func:`verify_chain` names the first entry that does not fit.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import ConfigurationError

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first audit entry."""

ENTRY_FIELDS = ("seq", "at", "identity", "action", "target", "reason", "detail")
"""The fields an audit entry's hash covers (with ``prev_hash``)."""


class Role(enum.StrEnum):
    SOURCE_WRITER = "source_writer"
    BUILDER = "builder"
    PUBLISHER = "publisher"
    APPROVER = "approver"
    CONSUMER = "consumer"
    AUDITOR = "auditor"
    PRIVACY_OFFICER = "privacy_officer"
    OPERATOR = "operator"


def parse_role(text: str) -> Role:
    """The role named ``text``, or a ConfigurationError listing the roles."""
    try:
        return Role(text.strip().lower())
    except ValueError:
        raise ConfigurationError(f"unknown role {text!r}; roles: {', '.join(r.value for r in Role)}") from None


@dataclass(frozen=True)
class Grant:
    """One identity holds one role, within an optional scope (None: any)."""

    identity: str
    role: Role
    definition: str | None = None
    source: str | None = None
    purpose: str | None = None
    columns: tuple[str, ...] = ()

    @property
    def scope(self) -> str:
        parts = [f"{k}={v}" for k, v in (("definition", self.definition), ("source", self.source), ("purpose", self.purpose)) if v]
        if self.columns:
            parts.append(f"columns={','.join(self.columns)}")
        return ", ".join(parts) or "any"

    def to_document(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "role": self.role.value,
            "definition": self.definition,
            "source": self.source,
            "purpose": self.purpose,
            "columns": list(self.columns),
        }


def _definition_covers(granted: str | None, wanted: str | None) -> bool:
    """``name`` covers every version of ``name``; ``name:version`` only that version."""
    if granted is None:
        return True
    if wanted is None:
        return False
    if ":" in granted:
        return wanted == granted or wanted.startswith(granted + "@")
    return wanted == granted or wanted.split(":", 1)[0].split("@", 1)[0] == granted


def grant_covers(grant: Grant, role: Role, *, definition: str | None = None, source: str | None = None, purpose: str | None = None) -> bool:
    """Whether ``grant`` allows ``role`` on this definition, source and purpose (a scoped grant needs the request to name it)."""
    if grant.role is not role:
        return False
    if not _definition_covers(grant.definition, definition):
        return False
    if grant.source is not None and grant.source != source:
        return False
    return grant.purpose is None or grant.purpose == purpose


def describe_request(identity: str, role: Role, *, definition: str | None = None, source: str | None = None, purpose: str | None = None) -> str:
    """``identity 'x' has no grant for role 'builder' on definition=..., source=...`` (the refusal's wording)."""
    scope = ", ".join(f"{k}={v}" for k, v in (("definition", definition), ("source", source), ("purpose", purpose)) if v) or "any scope"
    return f"identity {identity!r} has no grant for role {role.value!r} on {scope}"


# ---------------------------------------------------------------- the audit chain


def audit_entry_hash(prev_hash: str, entry_fields: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the entry's fields and the previous entry's hash."""
    document = {k: entry_fields.get(k) for k in ENTRY_FIELDS}
    document["prev_hash"] = prev_hash
    return canonical_json.sha256_hex(document)


@dataclass(frozen=True)
class Break:
    """The first audit entry that does not fit the chain, and why."""

    seq: int
    reason: str

    def __str__(self) -> str:
        return f"audit entry {self.seq}: {self.reason}"


def verify_chain(entries: Iterable[Mapping[str, Any]]) -> list[Break]:
    """Check ``entries`` (ordered by seq; each with ENTRY_FIELDS, ``prev_hash``, ``entry_hash``); the first break, or []."""
    prev = GENESIS_HASH
    expected_seq = 1
    for entry in entries:
        seq = int(entry["seq"])
        if seq != expected_seq:
            return [Break(seq, f"sequence gap: expected {expected_seq}, found {seq} (an entry was removed or inserted)")]
        if entry.get("prev_hash") != prev:
            return [Break(seq, f"prev_hash {entry.get('prev_hash')} does not match the previous entry's hash {prev}")]
        recomputed = audit_entry_hash(prev, entry)
        if recomputed != entry.get("entry_hash"):
            return [Break(seq, f"entry_hash {entry.get('entry_hash')} does not match its fields (recomputed {recomputed}): the entry was altered")]
        prev = recomputed
        expected_seq += 1
    return []


def columns_of(text: str | None) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``; empty names dropped, order kept, duplicates removed."""
    if not text:
        return ()
    return tuple(dict.fromkeys(c.strip() for c in text.split(",") if c.strip()))
