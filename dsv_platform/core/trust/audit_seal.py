"""Signed audit entries and checkpoints, and the offline check of an exported log (pure; docs/trust.md, "The audit log").

Every entry's ``entry_hash`` (which chains over every earlier entry) is signed by the acting identity
(:func:`entry_statement`). A checkpoint is a signature over the head: its sequence number, hash, the entry count and
the time (:func:`checkpoint_statement`), written at privileged actions and every ``CHECKPOINT_EVERY`` entries.
:func:`check_against_checkpoints` finds a log cut short or rewritten behind a checkpoint; :func:`verify_export` checks
an exported file with no registry at all. Signatures are DSSE PAE over ``events.EVENT_PAYLOAD_TYPE``, as signed events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import AuditChainError, AuditTamperedError
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of
from dsv_platform.core.trust.trust import verify_chain

ENTRY_TYPE = "https://dsv-platform.dev/audit-entry/v1"
CHECKPOINT_TYPE = "https://dsv-platform.dev/audit-checkpoint/v1"
EXPORT_FORMAT = "dsv-audit-export/v1"
CHECKPOINT_EVERY = 50
"""A checkpoint is written at least every this many entries."""
CHECKPOINT_ACTIONS = frozenset(
    {"publish", "grant.add", "grant.remove", "trust.certify", "approve", "revoke", "alias.move", "quarantine", "release", "release.approve",
     "privacy.delete", "privacy.model_obligation.close", "privacy.reconcile.canonical", "gc.apply", "canonical.seal", "model.approve",
     "model.revoke", "model.alias.move", "deploy.record", "keys.copy"}
)  # fmt: skip
"""Privileged actions: each one's entry is followed by a checkpoint of the head."""
BOOTSTRAP = "bootstrap"
"""The identity the bootstrap's own grants are attributed to: signed by the bootstrapped identity."""

Verify = Callable[[bytes, bytes, bytes], bool]  # (public key, signature, data) -> whether it verifies


def entry_statement(seq: int, entry_hash: str) -> bytes:
    """What the acting identity signs for entry ``seq``: its hash, which covers its fields and every earlier entry."""
    return canonical_json.dumps({"_type": ENTRY_TYPE, "seq": seq, "entry_hash": entry_hash})


def checkpoint_statement(seq: int, head: str, count: int, at: str) -> bytes:
    """What a checkpoint signs: the head entry's seq and hash, how many entries the log holds, and when."""
    return canonical_json.dumps({"_type": CHECKPOINT_TYPE, "seq": seq, "head": head, "count": count, "at": at})


def wants_checkpoint(action: str, seq: int, last_checkpoint: int) -> bool:
    return action in CHECKPOINT_ACTIONS or seq - last_checkpoint >= CHECKPOINT_EVERY


def describe_checkpoint(cp: Mapping[str, Any]) -> str:
    return f"checkpoint #{cp['id']} (entry {cp['seq']}, {cp['count']} entries, signed by {cp['signer']!r} at {cp['at']})"


def check_against_checkpoints(entries: Sequence[Mapping[str, Any]], checkpoints: Iterable[Mapping[str, Any]]) -> str | None:
    """The first checkpoint the log contradicts (cut short, or a different entry at its head), as a sentence; None when none does."""
    by_seq = {int(e["seq"]): e for e in entries}
    for cp in checkpoints:
        seq = int(cp["seq"])
        if seq not in by_seq:
            return f"the log ends at entry {len(entries)}, but {describe_checkpoint(cp)} covers entry {seq}: entries were cut off its tail"
        if by_seq[seq]["entry_hash"] != cp["head"] or int(cp["count"]) != seq:
            return f"entry {seq} hashes to {by_seq[seq]['entry_hash']}, but {describe_checkpoint(cp)} signed head {cp['head']}: the log was rewritten"
    return None


def signer_problem(entry: Mapping[str, Any], signer: str, bootstrap: str | None) -> str | None:
    """Why ``signer`` may not have signed ``entry`` (entries are signed by the identity they name), or None."""
    if signer == entry["identity"] or (entry["identity"] == BOOTSTRAP and signer == bootstrap):
        return None
    return f"audit entry {entry['seq']} names {entry['identity']!r} but is signed by {signer!r}: the entry was re-attributed or forged"


# ---------------------------------------------------------------- the exported file


def _untrusted(message: str, **detail: object) -> AuditTamperedError:
    return AuditTamperedError(f"audit export: {message}", detail=dict(detail))


def _export_keys(doc: Mapping[str, Any], root: bytes | None, verify: Verify) -> dict[str, bytes]:
    """The signers' keys of the file; with ``root``, each must chain to it through the key certificates the file carries."""
    keys = {str(k): bytes.fromhex(str(v)) for k, v in dict(doc.get("keys") or {}).items()}
    if root is None:
        return keys
    certs: dict[str, list[Mapping[str, Any]]] = {}
    for c in doc.get("key_certificates") or []:
        certs.setdefault(str(c["identity"]), []).append(c)

    def chained(name: str, depth: int = 0) -> bool:
        key = keys.get(name)
        if key is None or depth > 8:
            return False
        if key == root:
            return True
        statement = ev.certificate_statement("key", {"identity": name, "public_key": key.hex()})
        return any(
            (by := keys.get(str(c["certifier"]))) is not None and verify(by, bytes.fromhex(str(c["signature"])), ev.signed_bytes(statement))
            and chained(str(c["certifier"]), depth + 1)
            for c in certs.get(name, [])
        )

    for name in keys:
        if not chained(name):
            raise _untrusted(f"the key of {name!r} does not chain to the trust root {root.hex()}", identity=name)
    return keys


def _check_signature(keys: Mapping[str, bytes], signer: str, keyid: str, signature: str, statement: bytes, what: str, verify: Verify) -> None:
    key = keys.get(signer)
    if key is None or keyid_of(key) != keyid or not verify(key, bytes.fromhex(signature), ev.signed_bytes(statement)):
        raise _untrusted(f"the signature of {what} by {signer!r} does not verify", signer=signer)


def verify_export(doc: Mapping[str, Any], verify: Verify, *, root: bytes | None = None) -> dict[str, Any]:
    """Check an exported log on its own: the chain, every entry's signature, every checkpoint; a summary, or the typed error.

    A broken chain is AuditChainError (exit 2); a bad signature, a key not chaining to ``root``, a checkpoint the entries
    contradict or an unsigned entry after the first signed one is AuditTamperedError (UNTRUSTED, exit 13).
    """
    if doc.get("format") != EXPORT_FORMAT:
        raise AuditChainError(f"audit export: format is {doc.get('format')!r}, expected {EXPORT_FORMAT!r}")
    entries = list(doc.get("entries") or [])
    breaks = verify_chain(entries)
    if breaks:
        raise AuditChainError(f"audit export does not verify: {breaks[0]}")
    keys = _export_keys(doc, root, verify)
    signatures = {int(s["seq"]): s for s in doc.get("signatures") or []}
    signed_from = min(signatures, default=None)
    for e in entries:
        sig = signatures.get(int(e["seq"]))
        if sig is None:
            if signed_from is not None and int(e["seq"]) > signed_from:
                raise _untrusted(f"audit entry {e['seq']} is not signed (every entry after {signed_from} is)", seq=e["seq"])
            continue
        if (problem := signer_problem(e, str(sig["signer"]), doc.get("bootstrap"))) is not None:
            raise _untrusted(problem, seq=e["seq"])
        _check_signature(keys, str(sig["signer"]), str(sig["keyid"]), str(sig["signature"]), entry_statement(int(e["seq"]), e["entry_hash"]),
                         f"audit entry {e['seq']}", verify)  # fmt: skip
    checkpoints = list(doc.get("checkpoints") or [])
    for cp in checkpoints:
        statement = checkpoint_statement(int(cp["seq"]), str(cp["head"]), int(cp["count"]), str(cp["at"]))
        _check_signature(keys, str(cp["signer"]), str(cp["keyid"]), str(cp["signature"]), statement, describe_checkpoint(cp), verify)
    if (problem := check_against_checkpoints(entries, checkpoints)) is not None:
        raise _untrusted(problem)
    head = entries[-1]["entry_hash"] if entries else None
    return {"verified": True, "entries": len(entries), "head": head, "signed_entries": len(signatures), "checkpoints": len(checkpoints)}


def compare_with_export(entries: Sequence[Mapping[str, Any]], doc: Mapping[str, Any], *, holder: str = "the registry") -> str | None:
    """Whether the registry's log (or ``holder``'s) still holds every entry of an earlier export, unchanged; the first difference, or None."""
    mine = {int(e["seq"]): e["entry_hash"] for e in entries}
    for e in doc.get("entries") or []:
        seq = int(e["seq"])
        if seq not in mine:
            return f"entry {seq} of the export is not in {holder} (its log ends at entry {len(entries)}): entries were cut off or deleted"
        if mine[seq] != e["entry_hash"]:
            return f"entry {seq} hashes to {mine[seq]} in {holder} but to {e['entry_hash']} in the export: the log was rewritten since"
    return check_against_checkpoints(entries, doc.get("checkpoints") or [])
