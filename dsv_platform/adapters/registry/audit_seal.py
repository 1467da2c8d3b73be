"""Signed audit entries and checkpoints (migration 15), written in the audit append's transaction and checked by ``dsv audit --verify``.

The engine's signer (the identity the process proved, signed_events.TrustPolicy) signs each entry it appends, and a
checkpoint of the head at privileged actions and every ``CHECKPOINT_EVERY`` entries (core/trust/audit_seal.py).
:func:`verify_log` checks the chain, each signature under the signer's certified key, that the signer is the identity
the entry names, and every checkpoint: an edit, a re-chained rewrite without the key or a cut tail is named.
:func:`export_document` is the log with its signatures, checkpoints and the signers' keys, to keep where the
registry's credentials cannot write. Details: docs/trust.md ("The audit log").
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.certificates import KEY, chain, verified_key, verifies
from dsv_platform.adapters.registry.signed_events import policy_of
from dsv_platform.core.errors import AuditChainError, AuditTamperedError
from dsv_platform.core.trust import audit_seal as seal
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of
from dsv_platform.core.trust.trust import verify_chain

SIGNED_FROM = "signed_audit_from"
"""Registry property: the first audit entry signed; every later one must be signed too."""
BOOTSTRAP_PROPERTY = "bootstrap"


def _property(conn: Connection, name: str) -> str | None:
    p = st.registry_properties
    value = conn.execute(select(p.c.value).where(p.c.name == name)).scalar()
    return None if value is None else str(value)


def write_checkpoint(conn: Connection, now: datetime) -> dict[str, Any] | None:
    """Sign the current head as the engine's signer, in the caller's transaction; the checkpoint (None: no signer or no entry)."""
    signer = policy_of(conn.engine).signer
    t = st.audit_log
    last = conn.execute(select(t.c.seq, t.c.entry_hash).order_by(t.c.seq.desc()).limit(1)).first()
    if signer is None or last is None:
        return None
    seq, head, at = int(last.seq), str(last.entry_hash), ev.moment(now)
    signature = signer.sign(ev.signed_bytes(seal.checkpoint_statement(seq, head, seq, at))).hex()
    row = {"seq": seq, "head": head, "count": seq, "at": now, "signer": signer.identity, "keyid": keyid_of(signer.public_key), "signature": signature}
    conn.execute(insert(st.audit_checkpoints).values(**row))
    return row | {"at": at}


def seal_entry(conn: Connection, seq: int, entry_hash: str, action: str, now: datetime) -> None:
    """Sign entry ``seq`` as the engine's signer, and checkpoint the head when ``action`` is privileged or one is due."""
    signer = policy_of(conn.engine).signer
    if signer is None:
        return
    signature = signer.sign(ev.signed_bytes(seal.entry_statement(seq, entry_hash))).hex()
    conn.execute(insert(st.audit_signatures).values(seq=seq, signer=signer.identity, keyid=keyid_of(signer.public_key), signature=signature))
    if _property(conn, SIGNED_FROM) is None:  # under the audit lock: the first signed entry
        conn.execute(insert(st.registry_properties).values(name=SIGNED_FROM, value=str(seq), recorded_by=signer.identity, recorded_at=now))
    last = conn.execute(select(func.max(st.audit_checkpoints.c.seq))).scalar()
    if seal.wants_checkpoint(action, seq, int(last or 0)):
        write_checkpoint(conn, now)


# ---------------------------------------------------------------- reading


def entry_of(row: Any) -> dict[str, Any]:
    return {
        "seq": int(row.seq),
        "at": row.at.isoformat(),
        "identity": row.identity,
        "action": row.action,
        "target": row.target,
        "reason": row.reason,
        "detail": json.loads(row.detail_json),
        "prev_hash": row.prev_hash,
        "entry_hash": row.entry_hash,
    }


def _checkpoints(conn: Connection) -> list[dict[str, Any]]:
    t = st.audit_checkpoints
    rows = conn.execute(select(t).order_by(t.c.id)).all()
    return [{"id": int(r.id), "seq": int(r.seq), "head": r.head, "count": int(r._mapping["count"]), "at": ev.moment(r.at), "signer": r.signer,
             "keyid": r.keyid, "signature": r.signature} for r in rows]  # fmt: skip


def _signatures(conn: Connection) -> dict[int, dict[str, Any]]:
    t = st.audit_signatures
    return {int(r.seq): {"seq": int(r.seq), "signer": r.signer, "keyid": r.keyid, "signature": r.signature} for r in conn.execute(select(t))}


def _tampered(message: str, **detail: object) -> AuditTamperedError:
    return AuditTamperedError(f"the audit log does not verify: {message}", detail=dict(detail))


def _key(conn: Connection, name: str, keyid: str, what: str, checks: Any) -> bytes:
    root = policy_of(conn.engine).root
    key = verified_key(conn, name, root, ref=what, checks=checks)  # a key row changed in the database: UNTRUSTED naming it
    if key is None or keyid_of(key) != keyid:
        raise _tampered(f"{what}: signer {name!r} has no registered key {keyid}", signer=name)
    return key


def verify_log(conn: Connection) -> dict[str, Any]:
    """Check the whole log (AuditChainError for a broken chain, AuditTamperedError for a signature or checkpoint); a summary."""
    entries = [entry_of(r) for r in conn.execute(select(st.audit_log).order_by(st.audit_log.c.seq))]
    breaks = verify_chain(entries)
    if breaks:
        raise AuditChainError(f"the audit log does not verify: {breaks[0]}")
    checks, signatures = chain(conn, policy_of(conn.engine).root), _signatures(conn)
    since, bootstrap = _property(conn, SIGNED_FROM), _property(conn, BOOTSTRAP_PROPERTY)
    for e in entries:
        sig = signatures.get(e["seq"])
        what = f"audit entry {e['seq']} ({e['action']} {e['target']} by {e['identity']})"
        if sig is None:
            if since is not None and e["seq"] >= int(since):
                raise _tampered(f"{what} is not signed (every entry of this registry from entry {since} on is)", seq=e["seq"])
            continue
        if (problem := seal.signer_problem(e, sig["signer"], bootstrap)) is not None:
            raise _tampered(problem, seq=e["seq"])
        key = _key(conn, sig["signer"], sig["keyid"], what, checks)
        if not verifies(key, bytes.fromhex(sig["signature"]), ev.signed_bytes(seal.entry_statement(e["seq"], e["entry_hash"]))):
            raise _tampered(f"{what}: the signature of {sig['signer']!r} does not verify (the entry or one before it was rewritten)", seq=e["seq"])
    checkpoints = _checkpoints(conn)
    for cp in checkpoints:
        key = _key(conn, cp["signer"], cp["keyid"], seal.describe_checkpoint(cp), checks)
        if not verifies(key, bytes.fromhex(cp["signature"]), ev.signed_bytes(seal.checkpoint_statement(cp["seq"], cp["head"], cp["count"], cp["at"]))):
            raise _tampered(f"the signature of {seal.describe_checkpoint(cp)} does not verify", checkpoint=cp["id"])
    if (problem := seal.check_against_checkpoints(entries, checkpoints)) is not None:
        raise _tampered(problem)
    newest = checkpoints[-1]["seq"] if checkpoints else None
    head = entries[-1]["entry_hash"] if entries else None
    return {"entries": len(entries), "head": head, "signed_entries": len(signatures), "checkpoints": len(checkpoints), "newest_checkpoint": newest}


def export_document(conn: Connection, now: datetime) -> dict[str, Any]:
    """The log, its signatures and checkpoints, the signers' keys and their key certificates (verifies offline: audit_seal.verify_export)."""
    entries = [entry_of(r) for r in conn.execute(select(st.audit_log).order_by(st.audit_log.c.seq))]
    signatures, checkpoints = _signatures(conn), _checkpoints(conn)
    names = {s["signer"] for s in signatures.values()} | {c["signer"] for c in checkpoints}
    certs = conn.execute(select(st.certificates).where(st.certificates.c.kind == KEY)).all()
    while more := {str(c.certifier) for c in certs if c.subject in names} - names:  # the certifiers up to the root
        names |= more
    keys = {r.name: r.public_key for r in conn.execute(select(st.identities).where(st.identities.c.name.in_(sorted(names))))}
    key_certificates = [{"identity": c.subject, "certifier": c.certifier, "signature": c.signature} for c in certs if c.subject in keys]
    return {
        "format": seal.EXPORT_FORMAT,
        "exported_at": ev.moment(now),
        "bootstrap": _property(conn, BOOTSTRAP_PROPERTY),
        "entries": entries,
        "signatures": [signatures[k] for k in sorted(signatures)],
        "checkpoints": checkpoints,
        "keys": keys,
        "key_certificates": key_certificates,
    }
