"""Who runs a command, what it may do, and the audit log (docs/trust.md).

:func:`current_identity` is the identity ``DSV_IDENTITY`` names (unset: the
home's bootstrap ``admin``), proven by holding its Ed25519 private key in the
key folder. :func:`require` returns the grant allowing a role, or raises
AccessDeniedError naming identity, role and scope. :func:`audit` appends one
hash-chained entry. A strict home (``DSV_STRICT=1`` or a ``STRICT`` file in the
home) makes its registry strict, once and for good: a strict registry bootstraps
nobody, and every action needs an explicit grant. A non-strict registry
bootstraps only its first identity; a fresh home on it mints nobody.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from dsv_platform.adapters.registry.certificates import ROOT_FILE, load_root
from dsv_platform.adapters.registry.launches import Launch, SignedBuild
from dsv_platform.adapters.registry.signed_events import EventSigner, pin_root, policy_of
from dsv_platform.adapters.registry.trust import BOOTSTRAP_PROPERTY, STRICT_PROPERTY, TrustRecords
from dsv_platform.bootstrap import Platform
from dsv_platform.core.errors import AccessDeniedError, ConfigurationError, FileAccessError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.trust.trust import Grant, Role, describe_request, grant_covers
from dsv_platform.services.trust.keys import check_identity_name, fingerprint, key_path, load_private_key, raw_public, write_new_key

__all__ = ["check_identity_name", "fingerprint", "key_path", "load_private_key"]  # re-exported: keys.py holds them

ADMIN = "admin"
"""The identity a non-strict home bootstraps on first use, holding every role."""
BOOTSTRAP = "bootstrap"
"""The identity recorded for the bootstrap's own grants in the audit log."""
STRICT_MARKER = "STRICT"
_identities: weakref.WeakKeyDictionary[Platform, Identity] = weakref.WeakKeyDictionary()
_launches: weakref.WeakKeyDictionary[Platform, Launch] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Identity:
    name: str
    public_key: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public_key)


def records(platform: Platform) -> TrustRecords:
    return TrustRecords.of(platform.registry)


class HomeSettings(Protocol):
    """What strictness is read from: the platform's settings (services never import settings.py)."""

    @property
    def strict(self) -> bool: ...

    @property
    def home(self) -> Path: ...


def is_strict(where: Platform | HomeSettings) -> bool:
    """Strict: ``DSV_STRICT=1``, a ``STRICT`` marker in the home (``dsv init --strict``), or, of a platform, a strict registry.

    Strictness is a property of the registry, recorded once: a platform whose home says strict records it, and every
    later process on that registry is strict whatever its own home or environment says.
    """
    settings = where.settings if isinstance(where, Platform) else where
    home_strict = settings.strict or (settings.home / STRICT_MARKER).exists()
    if not isinstance(where, Platform):
        return home_strict
    trust = records(where)
    if trust.registry_property(STRICT_PROPERTY) == "1":
        return True
    if home_strict:
        trust.record_property(STRICT_PROPERTY, "1", by=where.settings.identity or BOOTSTRAP)
    return home_strict


# ---------------------------------------------------------------- identities


def create_identity(platform: Platform, name: str, *, by: str) -> tuple[Identity, bool]:
    """A key pair for ``name`` (private key in the key folder, public key in the registry); False when it existed with this key."""
    path = key_path(platform, name)
    existing = records(platform).get_identity(name)
    if existing is not None and not path.exists():
        raise ConfigurationError(f"identity {name!r} already exists (fingerprint {existing.fingerprint}); its private key is not in {path.parent}")
    if not path.exists():
        write_new_key(path)
    public = raw_public(load_private_key(platform, name))
    record, created = records(platform).add_identity(name, public.hex(), fingerprint(public), created_by=by)
    if record.public_key != public.hex():
        raise AccessDeniedError(f"identity {name!r}: the private key at {path} does not match the public key in the registry ({record.fingerprint})")
    return Identity(name, public), created


def register_identity(platform: Platform, name: str, public: bytes, *, by: str) -> tuple[Identity, bool]:
    """The operator's side: record the public key a holder generated (``dsv identity keygen``), certified by the operator.

    No private key is written or read here. False when ``name`` existed with this key; another key is a ConfigurationError.
    """
    record, created = records(platform).add_identity(check_identity_name(name), public.hex(), fingerprint(public), created_by=by)
    if record.public_key != public.hex():
        raise ConfigurationError(f"identity {name!r} already exists with another public key ({record.fingerprint}), not {fingerprint(public)}")
    return Identity(name, public), created


def _bootstrap(platform: Platform, name: str) -> Identity:
    """A built-in identity (``admin``, the Dagster service's) of a non-strict registry, with every role.

    Only the registry's first identity is minted by the bootstrap (grants audited as ``bootstrap``). Once the
    registry has an identity, a built-in one is provisioned only by a process that proves it holds the private key
    of a registered ``operator`` (audited as that identity): a fresh home on the registry mints nobody.
    """
    trust = records(platform)
    path = key_path(platform, name)
    wrote = not path.exists()
    if wrote:
        write_new_key(path)
    public = raw_public(load_private_key(platform, name))
    every_role = [Grant(name, role) for role in Role]
    enlist_signer(platform, name)  # the registry's first identity certifies its own grants: its key becomes the pinned root
    if trust.bootstrap_identity(name, public.hex(), fingerprint(public), by=BOOTSTRAP, grants=every_role, reason="bootstrap of a non-strict registry"):
        pin_home_root(platform, public)
        return Identity(name, public)
    raced = trust.get_identity(name)
    if raced is not None and raced.public_key == public.hex():  # another process of this home bootstrapped it just now
        return Identity(name, public)
    holder = _operator_holder(platform, exclude=name)
    if holder is None:
        if wrote:
            path.unlink(missing_ok=True)
        raise AccessDeniedError(
            f"identity {name!r} is not registered, and this registry bootstraps nobody (it has identities, or is strict): "
            f"an operator creates it (dsv identity create {name})"
        )
    enlist_signer(platform, holder)  # the operator certifies the key and the grants it provisions
    identity, _ = create_identity(platform, name, by=holder)
    for role in Role:
        trust.change_grant(Grant(name, role), add=True, by=holder, reason=f"built-in identity of a non-strict registry, provisioned by {holder}")
    return identity


def _operator_holder(platform: Platform, *, exclude: str) -> str | None:
    """A registered identity holding an unscoped ``operator`` grant whose private key this process holds, or None."""
    trust = records(platform)
    for record in trust.identities():
        path = key_path(platform, record.name)
        if record.name == exclude or not path.is_file():
            continue
        if not any(g.role is Role.OPERATOR and g.definition is None and g.source is None for g in trust.grants(record.name)):
            continue
        try:
            held = raw_public(load_private_key(platform, record.name)).hex()
        except AccessDeniedError:
            continue
        if held == record.public_key:
            return record.name
    return None


def current_identity(platform: Platform) -> Identity:
    """The identity this platform acts as, proven by its private key; cached per platform."""
    cached = _identities.get(platform)
    if cached is not None:
        return cached
    strict = is_strict(platform)
    name = platform.settings.identity or (None if strict else ADMIN)
    if name is None:
        raise AccessDeniedError("a strict home needs an identity: set DSV_IDENTITY (docs/trust.md)")
    record = records(platform).get_identity(check_identity_name(name))
    if record is None:
        if strict or name != ADMIN:
            raise AccessDeniedError(f"identity {name!r} is not registered (dsv identity create {name})")
        identity = _bootstrap(platform, name)
    else:
        public = raw_public(load_private_key(platform, name))
        if public.hex() != record.public_key:
            raise AccessDeniedError(
                f"identity {name!r}: the private key at {key_path(platform, name)} does not match the registered public key ({record.fingerprint})"
            )
        identity = Identity(name, public)
        if not strict and policy_of(platform.registry.engine).root is None and name == (records(platform).registry_property(BOOTSTRAP_PROPERTY) or ADMIN):
            _upgrade_home(platform, name, public)
        records(platform).verified_key(name)  # a key row changed in the database is refused (certificates.py)
    _identities[platform] = identity
    enlist_signer(platform, name)
    return identity


def pin_home_root(platform: Platform, public: bytes) -> None:
    """Pin ``public`` as this home's trust root, once (``$DSV_HOME/trust_root``), unless ``DSV_TRUST_ROOT`` pins one already."""
    if platform.settings.trust_root:
        return
    path = platform.settings.home / ROOT_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError), path.open("x", encoding="utf-8") as out:
            out.write(public.hex() + "\n")
    except OSError as exc:
        raise FileAccessError(f"{path}: cannot write the trust root ({exc.strerror})") from exc
    pin_root(platform.registry.engine, load_root(None, platform.settings.home))


def _upgrade_home(platform: Platform, name: str, public: bytes) -> None:
    """A home without a pinned root: its bootstrap identity's key becomes its root; on a registry from before certificates, it
    certifies the rows as they are now (never on one with certificates: a new home must not bless rows changed since)."""
    enlist_signer(platform, name)
    pin_home_root(platform, public)
    if not records(platform).has_certificates():
        records(platform).certify_all(by=name)


def enlist_signer(platform: Platform, name: str) -> None:
    """From now on the registry's state transitions and alias moves are signed by ``name`` (its key is in the key folder)."""
    key = load_private_key(platform, name)
    policy_of(platform.registry.engine).signer = EventSigner(name, raw_public(key), key.sign)


def ensure_service_identity(platform: Platform, *, default: str) -> Identity:
    """The Dagster resource's identity: a non-strict home provisions the ``default`` service identity with every role on first use.

    Any other name must have been created (``dsv identity create``); a strict home provisions nothing.
    """
    name = platform.settings.identity or ADMIN
    if name == default and not is_strict(platform) and records(platform).get_identity(name) is None:
        _bootstrap(platform, name)
    return current_identity(platform)


# ---------------------------------------------------------------- grants


def grants_of(platform: Platform, identity: str) -> list[Grant]:
    """``identity``'s grants, each certified up to the pinned trust root (a grant row changed in the database: UNTRUSTED)."""
    return records(platform).verified_grants(identity)


def require(
    platform: Platform,
    role: Role,
    *,
    definition: str | None = None,
    source: str | None = None,
    purpose: str | None = None,
    identity: str | None = None,
) -> Grant:
    """The grant that lets ``identity`` (default: the current one) act as ``role`` here, or AccessDeniedError naming identity, role, scope."""
    name = identity or current_identity(platform).name
    for grant in records(platform).verified_grants(name, only=lambda g: grant_covers(g, role, definition=definition, source=source, purpose=purpose)):
        return grant
    detail: dict[str, object] = {"identity": name, "role": role.value, "definition": definition, "source": source, "purpose": purpose}
    raise AccessDeniedError(describe_request(name, role, definition=definition, source=source, purpose=purpose), ref=definition, detail=detail)


def change_grant(platform: Platform, grant: Grant, *, add: bool, reason: str | None = None) -> bool:
    """Add or remove a grant as the current identity, which must hold ``operator``; audited in the same transaction."""
    who = current_identity(platform).name
    require(platform, Role.OPERATOR, identity=who)
    if records(platform).get_identity(grant.identity) is None:
        raise ConfigurationError(f"identity {grant.identity!r} is not registered (dsv identity create {grant.identity})")
    return records(platform).change_grant(grant, add=add, by=who, reason=reason)


def record_builder(platform: Platform, realization_id: int, identity: str | None = None) -> None:
    records(platform).record_builder(realization_id, identity or current_identity(platform).name)


def builder_of(platform: Platform, realization_id: int) -> str | None:
    return records(platform).builder_of(realization_id)


# ---------------------------------------------------------------- signing


def sign_bytes(platform: Platform, data: bytes, identity: str | None = None) -> bytes:
    """An Ed25519 signature of ``data`` with the private key of ``identity`` (default: the current identity)."""
    name = identity or current_identity(platform).name
    return load_private_key(platform, name).sign(data)


def public_key_of(platform: Platform, identity: str) -> bytes | None:
    """The registered raw Ed25519 public key of ``identity`` (certified up to the pinned root, else UntrustedError), or None."""
    return records(platform).verified_key(identity)


def verify_signature(public_key: bytes, signature: bytes, data: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, data)
    except (InvalidSignature, ValueError):
        return False
    return True


# ---------------------------------------------------------------- audit


def audit(
    platform: Platform, action: str, target: str, *, reason: str | None = None, identity: str | None = None, detail: Mapping[str, Any] | None = None
) -> int:
    """Append one hash-chained audit entry; returns its sequence number.

    Callers pass opaque references, never direct identifiers; ``detail`` must be canonical JSON (no floats).
    """
    who = identity or current_identity(platform).name
    return records(platform).audit(identity=who, action=action, target=target, reason=reason, detail=detail)


@dataclass(frozen=True)
class Gatekeeper:
    """The trust checks of one platform, for services that receive only a registry (the Publisher, approval)."""

    platform: Platform

    @property
    def identity(self) -> str:
        return current_identity(self.platform).name

    def require(self, role: Role, *, definition: str | None = None, source: str | None = None, purpose: str | None = None) -> Grant:
        return require(self.platform, role, definition=definition, source=source, purpose=purpose)

    def record_builder(self, realization_id: int) -> None:
        """The builder: in a Dagster run, who launched it (launch.py; unverified: the service identity), else the current identity."""
        launch = _launches.get(self.platform)
        if launch is None:
            record_builder(self.platform, realization_id)
            return
        from dsv_platform.services.trust.launch import with_builder_grant  # here: launch.py imports this module

        realization = self.platform.registry.get(realization_id)
        records(self.platform).record_launch(realization_id, with_builder_grant(self.platform, launch, f"{realization.dataset}:{realization.version}"))

    def audit(self, action: str, target: str, *, reason: str | None = None, detail: Mapping[str, Any] | None = None) -> int:
        return audit(self.platform, action, target, reason=reason, detail=detail)

    def signed_build(self, realization: Realization) -> SignedBuild | None:
        """The builder and launch ``realization``'s signed statement names (builders.py); None when it was published before signing."""
        from dsv_platform.services.trust.builders import signed_build  # here: builders.py imports signing.py, which imports this module

        return signed_build(self.platform, realization)


def gatekeeper(platform: Platform) -> Gatekeeper:
    return Gatekeeper(platform)


def adopt_launch(platform: Platform, launch: Launch) -> None:
    """From now on ``platform`` builds for the Dagster run ``launch`` describes: its launcher (or the service) is the builder."""
    _launches[platform] = launch


def mark_strict(platform: Platform) -> None:
    """Write the home's ``STRICT`` marker (``dsv init --strict``); a strict home stays strict."""
    settings = platform.settings
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
        (settings.home / STRICT_MARKER).write_text("every action needs an explicit grant (docs/trust.md)\n")
    except OSError as exc:
        raise FileAccessError(f"{settings.home / STRICT_MARKER}: cannot write ({exc.strerror})") from exc
    records(platform).record_property(STRICT_PROPERTY, "1", by=settings.identity or BOOTSTRAP)  # the registry stays strict too
