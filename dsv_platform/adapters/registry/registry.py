"""The registry: the one metadata authority (SQLAlchemy 2 Core; SQLite or PostgreSQL).

All times are UTC. Every state change and its event are written in one
transaction; events and alias history are append-only (database triggers
refuse UPDATE and DELETE). Transactions and retry on a lost race live in
transactions.py; lineage, consumption, retention, reproduction and privacy
records and redaction generations in bookkeeping.py; see publication.py for publish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from dsv_platform.adapters.registry import aliases as al
from dsv_platform.adapters.registry import approval as ap
from dsv_platform.adapters.registry import consumers, migrations
from dsv_platform.adapters.registry import publication as pub
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import resolution as res
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import signed_events as se
from dsv_platform.adapters.registry.bookkeeping import RegistryBookkeeping
from dsv_platform.adapters.registry.collection import RegistryCollection
from dsv_platform.adapters.registry.engine import create_registry_engine
from dsv_platform.adapters.registry.launches import SignedBuild
from dsv_platform.adapters.registry.signatures import RegistrySignatures
from dsv_platform.adapters.registry.transactions import Clock, utcnow
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import IllegalTransitionError, NotFoundError
from dsv_platform.core.publication.approval import DEFAULT_PROTECTED_ALIASES
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.publication.records import (
    AliasMove,
    AliasRecord,
    Definition,
    DefinitionConflictError,
    PublishOutcome,
    Realization,
    RealizationEvent,
    check_alias_name,
    check_name,
    check_version,
)
from dsv_platform.core.publication.refs import DatasetRef, parse_ref
from dsv_platform.core.publication.states import ConcurrentTransitionError, RealizationState
from dsv_platform.core.trust import events as ev


class Registry(RegistrySignatures, RegistryBookkeeping, RegistryCollection):
    """Publication state, aliases, definitions and the records later issues add. Build one with :meth:`from_url`.

    The transactions come from :class:`RegistryTransactions`, the lineage, retention, reproduction
    and privacy records from :class:`RegistryBookkeeping` (bookkeeping.py).
    """

    protected_aliases: frozenset[str] = frozenset(DEFAULT_PROTECTED_ALIASES)
    """Aliases that may point only to ELIGIBLE realizations (platform.yaml ``protected_aliases``)."""

    @classmethod
    def from_url(
        cls, url: str, *, clock: Clock = utcnow, upgrade: bool = True, protected_aliases: Iterable[str] = DEFAULT_PROTECTED_ALIASES
    ) -> Registry:
        """Open the registry at a SQLAlchemy URL, applying missing migrations unless ``upgrade`` is False."""
        engine = create_registry_engine(url)
        if upgrade:
            migrations.upgrade(engine)
        registry = cls(engine, clock=clock)
        registry.protected_aliases = frozenset(protected_aliases)
        return registry

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ definitions

    def register_definition(
        self,
        name: str,
        version: str,
        *,
        contract: Mapping[str, Any],
        recipe: Mapping[str, Any],
        owner: str,
        allowed_readers: Sequence[str] = (),
    ) -> Definition:
        """Record a definition version; idempotent for identical content, refused for different content."""
        check_name(name)
        check_version(version)
        contract_json = canonical_json.dumps(contract).decode()
        recipe_json = canonical_json.dumps(recipe).decode()
        values = {
            "name": name,
            "version": version,
            "contract_json": contract_json,
            "contract_hash": canonical_json.sha256_hex(contract),
            "recipe_json": recipe_json,
            "recipe_hash": canonical_json.sha256_hex(recipe),
            "owner": owner,
            "allowed_readers_json": res.allowed_readers_json(list(allowed_readers)),
        }

        def work(conn: Connection) -> Definition:
            existing = q.find_definition(conn, name, version)
            if existing is None:
                conn.execute(insert(s.dataset_definitions).values(created_at=self._now(), **values))
                return q.find_definition(conn, name, version)  # type: ignore[return-value]
            if (existing.contract_hash, existing.recipe_hash) != (values["contract_hash"], values["recipe_hash"]):
                if existing.contract_hash != values["contract_hash"]:  # breaking a registered consumer: refused naming it
                    consumers.refuse_breaking_change(conn, existing, contract)
                raise DefinitionConflictError(
                    f"{name}:{version} is already registered with another contract or recipe; a semantic change is a new definition version"
                )
            return existing

        return self._retrying(work)

    def get_definition(self, name: str, version: str) -> Definition | None:
        with self._read() as conn:
            return q.find_definition(conn, name, version)

    def set_allowed_readers(self, name: str, version: str, readers: Sequence[str]) -> Definition:
        """Replace the reader ACL of a definition (empty: everyone may read)."""
        t = s.dataset_definitions
        with self._write() as conn:
            result = conn.execute(
                update(t).where(t.c.name == name, t.c.version == version).values(allowed_readers_json=res.allowed_readers_json(list(readers)))
            )
            if result.rowcount != 1:
                raise NotFoundError(f"no dataset definition {name}:{version}", ref=f"{name}:{version}")
            return q.find_definition(conn, name, version)  # type: ignore[return-value]

    # ------------------------------------------------------------ candidates and publication

    def create_candidate(self, name: str, version: str, request_id: str, logical_key: str, actor: str) -> int:
        """A STAGING candidate; idempotent per ``request_id`` (returns the existing candidate's id)."""
        check_name(name)
        check_version(version)
        return self._retrying(
            lambda conn: pub.create_candidate(
                conn, name=name, version=version, request_id=request_id, logical_key=logical_key, actor=actor, now=self._now()
            )
        )

    def get(self, realization_id: int) -> Realization:
        with self._read() as conn:
            return q.load_realization(conn, realization_id)

    def transition(
        self, realization_id: int, new_state: RealizationState, reason: str, actor: str, *, redaction_generation: int | None = None
    ) -> Realization:
        """Move a realization guarded by its current state; a concurrent change raises ConcurrentTransitionError.

        PUBLISHED is reachable here only for a realization that was published
        before (ELIGIBLE -> PUBLISHED, QUARANTINED -> PUBLISHED); first
        publication goes through :meth:`publish`. REDACTED records
        ``redaction_generation`` (default: the current generation).
        """
        with self._write() as conn:
            current = q.load_realization(conn, realization_id)
            values: dict[str, Any] = {}
            if new_state is RealizationState.PUBLISHED and q.find_claim(conn, realization_id=realization_id) is None:
                raise IllegalTransitionError(
                    f"realization {realization_id} was never published: use publish(), not transition(), for {current.state.value} -> PUBLISHED"
                )
            if new_state is RealizationState.REDACTED:
                values["redaction_generation"] = redaction_generation if redaction_generation is not None else q.current_generation(conn)
            return q.set_state(conn, current, new_state, reason=reason, actor=actor, at=self._now(), **values)

    def seal(self, realization_id: int, manifest: Manifest | Mapping[str, Any] | str | bytes, *, actor: str | None = None) -> Realization:
        """STAGING -> SEALED: store the manifest and record its manifest, content and schema hashes."""

        def work(conn: Connection) -> Realization:
            who = actor or q.load_realization(conn, realization_id).created_by
            return pub.seal(conn, realization_id, manifest, actor=who, now=self._now())

        return self._retrying(work)

    def publish(self, realization_id: int, request_id: str, *, actor: str | None = None) -> PublishOutcome:
        """Publish a sealed candidate: one conditional insert, idempotent by request id and manifest hash (publication.py)."""
        return self._retrying(lambda conn: pub.publish(conn, realization_id, request_id, actor=actor, now=self._now()), also=(ConcurrentTransitionError,))

    def find_by_request_id(self, request_id: str) -> Realization | None:
        """The realization a publish request id published, else the candidate a create request id made, else None."""
        with self._read() as conn:
            claim = q.find_claim(conn, request_id=request_id)
            if claim is not None:
                return q.load_realization(conn, claim.realization_id)
            row = conn.execute(select(s.realizations).where(s.realizations.c.request_id == request_id)).first()
            return None if row is None else q.realization_from_row(row)

    def find_by_manifest_hash(self, manifest_hash: str) -> Realization | None:
        """The published realization with this manifest, else the newest candidate sealed with it, else None."""
        with self._read() as conn:
            claim = q.find_claim(conn, manifest_hash=manifest_hash)
            if claim is not None:
                return q.load_realization(conn, claim.realization_id)
            t = s.realizations
            row = conn.execute(select(t).where(t.c.manifest_hash == manifest_hash).order_by(t.c.id.desc())).first()
            return None if row is None else q.realization_from_row(row)

    def events(self, realization_id: int) -> list[RealizationEvent]:
        """The realization's events, oldest first; ``actor`` is the signer where the event is signed (docs/trust.md)."""
        t = s.realization_events
        with self._read() as conn:
            found = [q.event_from_row(r) for r in conn.execute(select(t).where(t.c.realization_id == realization_id).order_by(t.c.id))]
            signed = se.signers(conn, ev.STATE, [e.id for e in found])
        return [replace(e, actor=signed.get(e.id, e.actor)) for e in found]

    # ------------------------------------------------------------ reading

    def resolve(self, name: str, version: str, manifest_hash: str | None = None, alias: str | None = None, *, actor: str | None = None) -> Realization:
        """One readable realization or a typed ResolutionError (resolution.py). ``name:v6`` alone means its newest readable publication."""
        with self._read() as conn:
            return res.resolve(conn, name, version, manifest_hash, alias, actor)

    def resolve_ref(self, ref: DatasetRef | str, *, actor: str | None = None) -> Realization:
        parsed = parse_ref(ref) if isinstance(ref, str) else ref
        return self.resolve(parsed.name, parsed.version, parsed.manifest_hash, parsed.alias, actor=actor)

    def versions(self, name: str, *, include_candidates: bool = False) -> list[Realization]:
        """Realizations of every definition version of ``name``, newest first; only published ones unless ``include_candidates``."""
        t, c = s.realizations, s.publication_claims
        stmt = select(t).where(t.c.dataset == name)
        if include_candidates:
            stmt = stmt.order_by(t.c.id.desc())
        else:
            stmt = stmt.join(c, c.c.realization_id == t.c.id).order_by(c.c.claimed_at.desc(), t.c.id.desc())
        with self._read() as conn:
            return [q.realization_from_row(r) for r in conn.execute(stmt)]

    def get_manifest(self, manifest_hash: str) -> str:
        """The stored canonical JSON text; the caller re-hashes it to detect CORRUPT."""
        with self._read() as conn:
            text = conn.execute(select(s.manifests.c.canonical_json).where(s.manifests.c.manifest_hash == manifest_hash)).scalar()
        if text is None:
            raise NotFoundError(f"no stored manifest {manifest_hash}", detail={"manifest_hash": manifest_hash})
        return str(text)

    # ------------------------------------------------------------ aliases

    def set_alias(
        self, name: str, version: str, alias: str, manifest_hash: str, *, expect: str | None, actor: str, reason: str = "", audit_as: str | None = None
    ) -> AliasRecord:
        """Compare-and-swap: point ``alias`` at a PUBLISHED/ELIGIBLE realization if it still points at ``expect``.

        ``expect=None`` means "must not exist yet". A stale expectation raises
        StaleAliasError (an AliasConflictError) naming the current target.
        """
        check_alias_name(alias)
        return self._retrying(
            lambda conn: al.set_alias(
                conn,
                name,
                version,
                alias,
                manifest_hash,
                expect=expect,
                actor=actor,
                reason=reason,
                now=self._now(),
                protected=self.protected_aliases,
                audit_as=audit_as,
            )
        )

    def approve(
        self, realization_id: int, *, reason: str, actor: str, audit_as: str | None = None, signed: SignedBuild | None = None
    ) -> tuple[Realization, bool]:
        """PUBLISHED -> ELIGIBLE as an event (actor, reason); False when already ELIGIBLE; ``audit_as``, ``signed``: see approval.py."""
        return self._retrying(
            lambda conn: ap.approve(conn, realization_id, reason=reason, actor=actor, now=self._now(), audit_as=audit_as, signed=signed),
            also=(ConcurrentTransitionError,),
        )

    def revoke(self, realization_id: int, *, reason: str, actor: str, force: bool = False, audit_as: str | None = None) -> tuple[Realization, bool, list[str]]:
        """ELIGIBLE -> PUBLISHED as an event; refused while a protected alias points at it unless ``force`` (approval.py)."""
        return self._retrying(
            lambda conn: ap.revoke(
                conn, realization_id, reason=reason, actor=actor, now=self._now(), protected=self.protected_aliases, force=force, audit_as=audit_as
            ),
            also=(ConcurrentTransitionError,),
        )

    def get_alias(self, name: str, version: str, alias: str) -> AliasRecord | None:
        with self._read() as conn:
            return al.get_alias(conn, name, version, alias)

    def alias_history(self, name: str, version: str, alias: str) -> list[AliasMove]:
        """The alias's moves, oldest first; ``actor`` is the signer where the move is signed (docs/trust.md)."""
        with self._read() as conn:
            return al.alias_history(conn, name, version, alias)
