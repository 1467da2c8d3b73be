"""The registry: the one metadata authority (SQLAlchemy 2 Core; SQLite or PostgreSQL).

All times are UTC. Every state change and its event are written in one
transaction; events and alias history are append-only (database triggers
refuse UPDATE and DELETE). Write transactions on SQLite start with
``BEGIN IMMEDIATE`` (see engine.py). On PostgreSQL, a write that loses a
unique constraint to a concurrent writer (IntegrityError) or hits a
deadlock/serialization failure is rolled back and re-run from a fresh read,
which then reconciles with the winner; see publication.py for publish.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from dsv_platform.adapters.registry import aliases as al
from dsv_platform.adapters.registry import migrations
from dsv_platform.adapters.registry import publication as pub
from dsv_platform.adapters.registry import queries as q
from dsv_platform.adapters.registry import resolution as res
from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry.engine import create_registry_engine
from dsv_platform.adapters.registry.privacy import PrivacyRecords
from dsv_platform.core.records import (
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
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import DsvError, IllegalTransitionError, NotFoundError
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.refs import DatasetRef, parse_ref
from dsv_platform.core.states import ConcurrentTransitionError, RealizationState


T = TypeVar("T")
Clock = Callable[[], datetime]
LineageEdge = tuple[str, str, str, str, str, Mapping[str, Any]]
ATTEMPTS = 20
_RETRYABLE_PGCODES = {"40001", "40P01"}  # serialization failure, deadlock detected


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Registry:
    """Publication state, aliases, definitions and the records later issues add. Build one with :meth:`from_url`."""

    def __init__(self, engine: Engine, *, clock: Clock = _utcnow) -> None:
        self.engine = engine
        self._clock = clock

    @classmethod
    def from_url(cls, url: str, *, clock: Clock = _utcnow, upgrade: bool = True) -> "Registry":
        """Open the registry at a SQLAlchemy URL, applying missing migrations unless ``upgrade`` is False."""
        engine = create_registry_engine(url)
        if upgrade:
            migrations.upgrade(engine)
        return cls(engine, clock=clock)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Registry":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ transactions

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise DsvError(f"registry clock returned a naive datetime {now!r}")
        return now.astimezone(UTC)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(dsv_write=True)
            with conn.begin():
                yield conn

    def _retrying(self, work: Callable[[Connection], T], *, also: tuple[type[Exception], ...] = ()) -> T:
        """Run ``work`` in a write transaction; after losing to a concurrent writer, roll back and run it again."""
        last: Exception | None = None
        for _ in range(ATTEMPTS):
            try:
                with self._write() as conn:
                    return work(conn)
            except IntegrityError as exc:
                last = exc
            except DBAPIError as exc:
                if getattr(exc.orig, "pgcode", None) not in _RETRYABLE_PGCODES:
                    raise
                last = exc
            except also as exc:
                last = exc
        raise DsvError(f"registry write kept conflicting with concurrent writers after {ATTEMPTS} attempts: {last}") from last

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
                raise IllegalTransitionError(f"realization {realization_id} was never published: use publish(), not transition(), for {current.state.value} -> PUBLISHED")
            if new_state is RealizationState.REDACTED:
                values["redaction_generation"] = redaction_generation if redaction_generation is not None else _generation(conn)
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
        t = s.realization_events
        with self._read() as conn:
            return [q.event_from_row(r) for r in conn.execute(select(t).where(t.c.realization_id == realization_id).order_by(t.c.id))]

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
        self, name: str, version: str, alias: str, manifest_hash: str, *, expect: str | None, actor: str, reason: str = ""
    ) -> AliasRecord:
        """Compare-and-swap: point ``alias`` at a PUBLISHED/ELIGIBLE realization if it still points at ``expect``.

        ``expect=None`` means "must not exist yet". A stale expectation raises
        StaleAliasError (an AliasConflictError) naming the current target.
        """
        check_alias_name(alias)
        return self._retrying(
            lambda conn: al.set_alias(conn, name, version, alias, manifest_hash, expect=expect, actor=actor, reason=reason, now=self._now())
        )

    def get_alias(self, name: str, version: str, alias: str) -> AliasRecord | None:
        with self._read() as conn:
            return al.get_alias(conn, name, version, alias)

    def alias_history(self, name: str, version: str, alias: str) -> list[AliasMove]:
        with self._read() as conn:
            return al.alias_history(conn, name, version, alias)

    # ------------------------------------------------------------ lineage and consumption

    def record_lineage(self, edges: Iterable[LineageEdge], *, actor: str) -> int:
        """Append lineage edges ``(src_kind, src_id, dst_kind, dst_id, relation, attributes)``; returns how many.

        The actor is kept in the edge's attributes as ``recorded_by``.
        """
        rows = [
            {
                "src_kind": src_kind,
                "src_id": src_id,
                "dst_kind": dst_kind,
                "dst_id": dst_id,
                "relation": relation,
                "attributes_json": canonical_json.dumps({**attributes, "recorded_by": actor}).decode(),
            }
            for src_kind, src_id, dst_kind, dst_id, relation, attributes in edges
        ]
        if rows:
            with self._write() as conn:
                conn.execute(insert(s.lineage_edges).values(recorded_at=self._now()), rows)
        return len(rows)

    def record_consumption(
        self, ref: str, *, actor: str, realization: Realization | None, failure: str | None, detail: Mapping[str, Any] | None = None
    ) -> None:
        """Record that ``actor`` read ``ref`` (``failure`` None) or failed to (``failure`` a FailureKind name)."""
        with self._write() as conn:
            conn.execute(
                insert(s.consumption_records).values(
                    actor=actor,
                    ref=ref,
                    realization_id=None if realization is None else realization.id,
                    manifest_hash=None if realization is None else realization.manifest_hash,
                    ok=failure is None,
                    failure_kind=failure,
                    at=self._now(),
                    detail_json=canonical_json.dumps(dict(detail or {})).decode(),
                )
            )

    # ------------------------------------------------------------ retention roots and lineage reads (retention.py, lineage.py)

    def add_retention_root(self, kind: str, ref: str, reason: str, owner: str, expires_at: datetime | None = None) -> int:
        """Record a GC root (model version, legal hold, report, experiment, alias, rollback window); idempotent; returns its id."""
        from dsv_platform.adapters.registry import retention

        return self._retrying(lambda conn: retention.add_root(conn, kind=kind, ref=ref, reason=reason, owner=owner, expires_at=expires_at, now=self._now()))

    def list_retention_roots(self, active_at: datetime | None = None, *, kind: str | None = None) -> list[Any]:
        """Every retention root, or only those active (not released, not expired) at ``active_at``."""
        from dsv_platform.adapters.registry import retention

        with self._read() as conn:
            return retention.list_roots(conn, active_at=active_at, kind=kind)

    def release_retention_root(self, root_id: int, actor: str, reason: str) -> Any:
        """Release a root (idempotent); the release is kept as a lineage edge with actor and reason."""
        from dsv_platform.adapters.registry import retention

        return self._retrying(lambda conn: retention.release_root(conn, root_id, actor=actor, reason=reason, now=self._now()))

    def state_watermark(self) -> dict[str, Any]:
        """Fingerprint of the registry state a GC plan depends on (retention.state_watermark)."""
        from dsv_platform.adapters.registry import retention

        with self._read() as conn:
            return retention.state_watermark(conn)

    def lineage_edges(self, *, node: tuple[str, str] | None = None) -> list[Any]:
        """Recorded lineage edges (all, or those touching ``(kind, id)``), oldest first (lineage.py)."""
        from dsv_platform.adapters.registry import lineage

        with self._read() as conn:
            return lineage.load_edges(conn, node=node)

    # ------------------------------------------------------------ reproduction records (reproduction.py)

    def record_reproduction(self, ref: str, manifest_hash: str, *, actor: str, outcome: str, details: Mapping[str, Any]) -> int:
        """Append one reproduction record (audit, rehearsal or integrity scan); returns its id."""
        from dsv_platform.adapters.registry import reproduction

        with self._write() as conn:
            return reproduction.add_record(conn, ref=ref, manifest_hash=manifest_hash, actor=actor, outcome=outcome, details=details, now=self._now())

    def reproduction_records(self, *, manifest_hash: str | None = None, procedure: str | None = None, limit: int | None = None) -> list[Any]:
        """Reproduction records, newest first."""
        from dsv_platform.adapters.registry import reproduction

        with self._read() as conn:
            return reproduction.list_records(conn, manifest_hash=manifest_hash, procedure=procedure, limit=limit)

    def realizations_in(self, states: frozenset[RealizationState]) -> list[Realization]:
        """Every realization in one of ``states``, oldest first."""
        from dsv_platform.adapters.registry import reproduction

        with self._read() as conn:
            return reproduction.realizations_in(conn, states)

    def consumption_summary(self) -> dict[str, dict[str, Any]]:
        """Per manifest hash: distinct readers, reads and failed reads by kind (consumption records)."""
        from dsv_platform.adapters.registry import reproduction

        with self._read() as conn:
            return reproduction.consumption_summary(conn)

    @property
    def privacy(self) -> PrivacyRecords:
        """Subject index, deletion requests and outcomes (privacy.py)."""
        return PrivacyRecords(self)

    # ------------------------------------------------------------ redaction generations

    def redaction_generation(self) -> int:
        """The current redaction generation (0 before any deletion)."""
        with self._read() as conn:
            return _generation(conn)

    def raise_redaction_generation(self, subject_key_hash: str, *, reason: str, actor: str) -> int:
        """Record a deletion and return the new, strictly greater generation."""

        def work(conn: Connection) -> int:
            generation = _generation(conn) + 1
            conn.execute(
                insert(s.redaction_generations).values(generation=generation, subject_key_hash=subject_key_hash, reason=reason, actor=actor, at=self._now())
            )
            return generation

        return self._retrying(work)


def _generation(conn: Connection) -> int:
    return int(conn.execute(select(func.max(s.redaction_generations.c.generation))).scalar() or 0)
