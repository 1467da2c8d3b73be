"""Signed registry events: the statement an identity signs for a state transition or an alias move (pure).

Each subject (a realization, an alias) has an ordered history of event rows. :func:`chain_hash` folds the rows
into one hash, each link over the previous link and the row's fields, so the signature of the newest event covers
every earlier one: an edited, inserted or deleted row changes it. :func:`event_statement` is what is signed (DSSE
PAE over ``EVENT_PAYLOAD_TYPE``): the subject, the newest row and the chain behind it. Details: docs/trust.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.trust.dsse import pae
from dsv_platform.core.trust.trust import GENESIS_HASH, Role

EVENT_PAYLOAD_TYPE = "application/vnd.dsv.registry-event+json"
STATE, ALIAS = "state", "alias"
STATE_TYPE = "https://dsv-platform.dev/registry-event/state/v1"
ALIAS_TYPE = "https://dsv-platform.dev/registry-event/alias/v1"
CERTIFICATE_TYPE = "https://dsv-platform.dev/certificate/{kind}/v1"


def moment(at: datetime) -> str:
    """A registry time as the signed text (UTC, microseconds): the same on SQLite and PostgreSQL."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def link(prev: str, fields: Mapping[str, Any]) -> str:
    return canonical_json.sha256_hex({"prev": prev, **fields})


def chain_hash(rows: Iterable[Mapping[str, Any]]) -> str:
    """The hash of a subject's event rows in order (GENESIS_HASH for none)."""
    head = GENESIS_HASH
    for fields in rows:
        head = link(head, fields)
    return head


def event_statement(kind: str, subject: Mapping[str, Any], event: Mapping[str, Any], prev: str) -> bytes:
    """The canonical bytes an identity signs for the newest ``event`` of ``subject``, behind the chain ``prev``."""
    return canonical_json.dumps({"_type": STATE_TYPE if kind == STATE else ALIAS_TYPE, "subject": dict(subject), "event": dict(event), "prev": prev})


def certificate_statement(kind: str, body: Mapping[str, Any]) -> bytes:
    """The canonical bytes an operator signs to certify an identity's key (``key``) or a grant (``grant``)."""
    return canonical_json.dumps({"_type": CERTIFICATE_TYPE.format(kind=kind), **body})


def signed_bytes(statement: bytes) -> bytes:
    return pae(EVENT_PAYLOAD_TYPE, statement)


def role_for_transition(from_state: str | None, to_state: str) -> tuple[Role, ...]:
    """The roles one of which the signer of a transition into a readable state must hold (empty: any identity)."""
    if to_state == "ELIGIBLE":
        return (Role.APPROVER,)
    if to_state == "PUBLISHED" and from_state == "ELIGIBLE":
        return (Role.APPROVER,)
    if to_state == "PUBLISHED" and from_state == "QUARANTINED":
        return (Role.OPERATOR, Role.APPROVER)
    if to_state == "PUBLISHED":
        return (Role.PUBLISHER,)
    return ()
