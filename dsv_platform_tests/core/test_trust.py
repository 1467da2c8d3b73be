"""Issue 16: the pure trust rules: grant scopes and the audit chain's verification."""

from __future__ import annotations

from typing import Any

import pytest

from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.trust.trust import GENESIS_HASH, Grant, Role, audit_entry_hash, grant_covers, parse_role, verify_chain


def chain(n: int) -> list[dict[str, Any]]:
    entries, prev = [], GENESIS_HASH
    for seq in range(1, n + 1):
        fields = {"seq": seq, "at": f"2026-06-0{seq}T00:00:00+00:00", "identity": "ops", "action": "publish", "target": f"t{seq}", "reason": None, "detail": {}}
        prev = audit_entry_hash(prev, fields)
        entries.append({**fields, "prev_hash": entries[-1]["entry_hash"] if entries else GENESIS_HASH, "entry_hash": prev})
    return entries


def test_a_chain_verifies_and_each_kind_of_tampering_is_named() -> None:
    assert verify_chain(chain(4)) == []
    edited = chain(4)
    edited[1]["target"] = "elsewhere"
    assert [(b.seq, "altered" in b.reason) for b in verify_chain(edited)] == [(2, True)]
    rehashed = chain(4)  # an edit re-hashed in place still breaks the next entry's link
    rehashed[1]["target"] = "elsewhere"
    rehashed[1]["entry_hash"] = audit_entry_hash(rehashed[1]["prev_hash"], rehashed[1])
    assert [(b.seq, "prev_hash" in b.reason) for b in verify_chain(rehashed)] == [(3, True)]
    dropped = chain(4)
    del dropped[2]
    assert str(verify_chain(dropped)[0]) == "audit entry 4: sequence gap: expected 3, found 4 (an entry was removed or inserted)"
    swapped = chain(4)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    assert verify_chain(swapped)[0].seq == 3


def test_grant_scopes_and_roles() -> None:
    anything = Grant("ops", Role.OPERATOR)
    assert grant_covers(anything, Role.OPERATOR, definition="x:v1", source="s") and not grant_covers(anything, Role.BUILDER)
    named = Grant("b", Role.BUILDER, definition="fraud_training_set")
    assert grant_covers(named, Role.BUILDER, definition="fraud_training_set:v6@sha256:" + "0" * 64)
    assert not grant_covers(named, Role.BUILDER, definition="fraud_training_setx:v6") and not grant_covers(named, Role.BUILDER)
    pinned = Grant("b", Role.BUILDER, definition="fraud_training_set:v5")
    assert grant_covers(pinned, Role.BUILDER, definition="fraud_training_set:v5") and not grant_covers(pinned, Role.BUILDER, definition="fraud_training_set:v6")
    assert parse_role(" Approver ") is Role.APPROVER
    with pytest.raises(ConfigurationError, match="unknown role 'root'; roles: source_writer, builder"):
        parse_role("root")
