"""Operator certificates of identity keys and grants (migration 14), checked against a trust root pinned outside the registry.

An identity's public key and each grant count only when a certificate signs them: signed by the root identity (the
one whose key is the pinned root) or by an identity whose own key is certified and which holds a certified unscoped
``operator`` grant. Without a pinned root (a registry used outside a platform, an unpinned home) the rows are taken as
they are. A row changed in the database no longer matches its certificate and is refused naming it. Details: docs/trust.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Row, insert, select
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.core.errors import EnvironmentSetupError, UntrustedError
from dsv_platform.core.trust import events as ev
from dsv_platform.core.trust.dsse import keyid_of
from dsv_platform.core.trust.trust import Grant, Role, parse_role

KEY, GRANT = "key", "grant"
_DEPTH = 8
ROOT_FILE = "trust_root"
"""The home's pinned root (hex Ed25519 public key), written once when the home bootstraps its registry."""


def parse_root(text: str, *, what: str) -> bytes:
    """A raw Ed25519 public key from ``<64 hex>`` or ``ed25519:<64 hex>``; EnvironmentSetupError naming ``what`` otherwise."""
    value = text.strip().removeprefix("ed25519:")
    try:
        key = bytes.fromhex(value)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise EnvironmentSetupError(f"{what}: not an Ed25519 public key (64 hex digits, optionally prefixed ed25519:): {text.strip()[:80]!r}")
    return key


def load_root(setting: str | None, home: Path) -> bytes | None:
    """The pinned trust root: ``DSV_TRUST_ROOT`` (a key, or a file holding one), else the home's ``trust_root`` file, else None."""
    if setting:
        path = Path(setting)
        if not path.is_file():
            return parse_root(setting, what="DSV_TRUST_ROOT")
        return parse_root(path.read_text(encoding="utf-8"), what=f"DSV_TRUST_ROOT file {path}")
    pinned = home / ROOT_FILE
    return parse_root(pinned.read_text(encoding="utf-8"), what=str(pinned)) if pinned.is_file() else None


def grant_of(row: Row[Any]) -> Grant:
    return Grant(row.identity, parse_role(row.role), row.definition, row.source, row.purpose, tuple(json.loads(row.columns_json)))


def key_statement(name: str, public_key_hex: str) -> bytes:
    return ev.certificate_statement(KEY, {"identity": name, "public_key": public_key_hex})


def grant_statement(row: Row[Any]) -> bytes:
    body = {"scope_key": row.scope_key, "grant": grant_of(row).to_document(), "created_by": row.created_by, "created_at": ev.moment(row.created_at)}
    return ev.certificate_statement(GRANT, body)


def certify(conn: Connection, kind: str, subject: str, statement: bytes, *, by: str, public_key: bytes, sign: Callable[[bytes], bytes], now: datetime) -> None:
    """Record ``by``'s certificate of ``statement`` (a key or a grant) in the caller's transaction."""
    conn.execute(
        insert(st.certificates).values(
            kind=kind,
            subject=subject,
            statement_hash=hashlib.sha256(statement).hexdigest(),
            certifier=by,
            keyid=keyid_of(public_key),
            signature=sign(ev.signed_bytes(statement)).hex(),
            certified_at=now,
        )
    )


def verifies(public_key: bytes, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s Ed25519 signature of ``data`` (certificates and signed events alike)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


def _refuse(ref: str | None, message: str, **detail: object) -> UntrustedError:
    return UntrustedError(message, ref=ref, detail=dict(detail))


class _Chain:
    """Certificate checks of one read, up to ``root``: each identity's key and operator standing is worked out once."""

    def __init__(self, conn: Connection, root: bytes) -> None:
        self.conn, self.root = conn, root
        self.keys: dict[str, bytes | None] = {}
        self.operators: dict[str, bool] = {}

    def certified_by(self, kind: str, subject: str, statement: bytes, depth: int = 0) -> str | None:
        """The certifier of a valid certificate of ``statement``, or None."""
        t = st.certificates
        digest = hashlib.sha256(statement).hexdigest()
        for cert in self.conn.execute(select(t).where(t.c.kind == kind, t.c.subject == subject, t.c.statement_hash == digest).order_by(t.c.id.desc())):
            key = self.key(cert.certifier, depth + 1)
            if key is None or keyid_of(key) != cert.keyid or not verifies(key, bytes.fromhex(cert.signature), ev.signed_bytes(statement)):
                continue
            if key == self.root or self.is_operator(cert.certifier, depth + 1):
                return str(cert.certifier)
        return None

    def key(self, name: str, depth: int = 0) -> bytes | None:
        if name in self.keys or depth > _DEPTH:
            return self.keys.get(name)
        self.keys[name] = None  # a cycle of certificates certifies nothing
        row = self.conn.execute(select(st.identities).where(st.identities.c.name == name)).first()
        if row is not None:
            public = bytes.fromhex(row.public_key)
            if public == self.root or self.certified_by(KEY, name, key_statement(name, row.public_key), depth) is not None:
                self.keys[name] = public
        return self.keys[name]

    def is_operator(self, name: str, depth: int) -> bool:
        if name in self.operators or depth > _DEPTH:
            return self.operators.get(name, False)
        self.operators[name] = False
        rows = self.conn.execute(select(st.grants).where(st.grants.c.identity == name, st.grants.c.role == Role.OPERATOR.value))
        self.operators[name] = any(
            r.definition is None and r.source is None and self.certified_by(GRANT, r.scope_key, grant_statement(r), depth) is not None for r in rows
        )
        return self.operators[name]


def chain(conn: Connection, root: bytes | None) -> _Chain | None:
    """One read's certificate checks up to ``root`` (None without a root), to share between :func:`verified_key` and :func:`verified_grants`."""
    return None if root is None else _Chain(conn, root)


def verified_key(conn: Connection, name: str, root: bytes | None, *, ref: str | None = None, checks: _Chain | None = None) -> bytes | None:
    """``name``'s registered public key (None: not registered); with a ``root``, only if certified, else UntrustedError naming it."""
    if root is not None and (key := (checks or _Chain(conn, root)).key(name)) is not None:
        return key
    row = conn.execute(select(st.identities).where(st.identities.c.name == name)).first()
    if row is None:
        return None
    if root is None:
        return bytes.fromhex(row.public_key)
    raise _refuse(
        ref,
        f"identity {name!r}: its public key {row.fingerprint} in the registry has no certificate chaining to the trust root "
        "(the key row was changed, or it was never certified: dsv trust certify)",
        identity=name,
        fingerprint=row.fingerprint,
    )


def verified_grants(
    conn: Connection,
    name: str,
    root: bytes | None,
    *,
    ref: str | None = None,
    only: Callable[[Grant], bool] | None = None,
    checks: _Chain | None = None,
) -> list[Grant]:
    """``name``'s grants (``only`` those it keeps); with a ``root``, each must be certified, else UntrustedError naming the grant."""
    t = st.grants
    rows = [r for r in conn.execute(select(t).where(t.c.identity == name).order_by(t.c.role, t.c.id)) if only is None or only(grant_of(r))]
    if root is None:
        return [grant_of(r) for r in rows]
    checks = checks or _Chain(conn, root)
    for r in rows:
        if checks.certified_by(GRANT, r.scope_key, grant_statement(r)) is None:
            grant = grant_of(r)
            raise _refuse(
                ref,
                f"grant {grant.role.value} {grant.scope} of identity {name!r} (row {r.id}) has no operator certificate chaining to the trust root "
                "(the grant row was changed or added outside dsv grants)",
                identity=name,
                grant=grant.to_document(),
            )
    return [grant_of(r) for r in rows]
