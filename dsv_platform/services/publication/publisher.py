"""The build protocol: every dataset realization goes through here.

Stage, seal, gate, publish with one conditional insert, then move an alias: a builder
killed at any step leaves nothing a reader can see, and a rerun with the same request id
converges to one published version with the same manifest hash.

Details: docs/publication.md
"""

from __future__ import annotations

import enum
import hashlib
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow as pa

from dsv_platform.adapters.engine.memory import release_free_memory
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.collection import ObjectsBeingCollectedError
from dsv_platform.adapters.registry.launches import launch_document
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.adapters.registry.trust import TrustRecords
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.errors import AliasConflictError, PublicationError
from dsv_platform.core.identity.hashing import hash_partition
from dsv_platform.core.publication.gates import GateResult, GatesFailedError, QualityReport, report_of
from dsv_platform.core.publication.manifest import BuiltPart, Manifest, build_manifest
from dsv_platform.core.publication.records import PublishOutcome, Realization
from dsv_platform.core.publication.retry import retry
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.lineage.lineage import record_realization_lineage
from dsv_platform.services.publication.parallel_parts import default_build_jobs, ordered_map
from dsv_platform.services.publication.parts import KeyOrderedRows, PreparedPart, parquet_bytes, sorted_for_storage, spooled_part
from dsv_platform.services.trust.signing import Signer, sign_realization
from dsv_platform.services.trust.trust import Gatekeeper


class BuildStep(enum.Enum):
    """Protocol steps, reported to ``on_step`` as they complete (progress, tests that kill a builder)."""

    CANDIDATE = "candidate"
    PART_WRITTEN = "part_written"
    SEALED = "sealed"
    GATES_RUN = "gates_run"
    PUBLISHED = "published"
    ALIAS_MOVED = "alias_moved"


Rows: TypeAlias = pa.Table | Callable[[], pa.Table] | KeyOrderedRows
"""A partition's rows, or a reader of them called when the part is prepared (a build then holds one partition at a time),
or a key-ordered reader (a build then holds one table of rows at a time)."""
Gates = Callable[[Manifest, Mapping[str, Rows]], Iterable[GateResult]]


@dataclass(frozen=True)
class BuildRequest:
    dataset: str
    version: str
    contract: Contract
    request_id: str
    partitions: Sequence[tuple[str, Rows]]
    logical_key: str | None = None
    manifest_fields: Mapping[str, Any] = field(default_factory=dict)
    gates: Gates | None = None
    alias: str | None = None
    card: Callable[[Manifest, str], bytes] | None = None  # the dataset card of (manifest, report object), stored and signed


@dataclass(frozen=True)
class BuildResult:
    realization: Realization
    manifest: Manifest
    outcome: PublishOutcome
    report: QualityReport
    report_object: str

    @property
    def ref(self) -> str:
        return self.realization.ref


GC_WAIT_S = 300.0
"""How long a publication waits for a GC batch that is deleting objects its manifest names."""


class Publisher:
    """Runs the build protocol against one registry and one object store."""

    def __init__(
        self,
        registry: Registry,
        store: ObjectStore,
        *,
        actor: str,
        on_step: Callable[[BuildStep, str], None] | None = None,
        row_filter: Callable[[pa.Table], pa.Table] | None = None,
        signer: Signer | None = None,
        gate: Gatekeeper | None = None,
        jobs: int | None = None,
    ) -> None:
        self.registry = registry
        self.store = store
        self.actor = actor if gate is None else gate.identity  # with a gate: the identity that proved its key, never free text
        self.on_step = on_step or (lambda step, detail: None)
        self.row_filter = row_filter  # e.g. privacy.exclude_deleted_subjects: drops rows of deleted subjects
        self.signer = signer  # the publisher identity: signs each realization's statement (docs/trust.md, "Signatures")
        self.gate = gate  # roles checked (builder, then publisher), builder recorded, publication and alias moves audited (docs/trust.md)
        self.jobs = default_build_jobs() if jobs is None else max(1, jobs)  # partitions prepared at once; 1: the serial path

    def write_part(self, attempt: str, key: str, table: Rows, contract: Contract) -> BuiltPart:
        return self.store_part(attempt, self.prepare_part(key, table, contract), contract)

    def prepare_part(self, key: str, rows: Rows, contract: Contract) -> PreparedPart:
        """A part's CPU work, no store call: read, row filter, sort, hash, Parquet bytes (safe on a worker thread)."""
        if isinstance(rows, KeyOrderedRows):
            return spooled_part(key, rows, contract, self.row_filter)
        table = rows() if callable(rows) else rows
        if self.row_filter is not None:
            table = self.row_filter(table)
        rows = sorted_for_storage(table, contract)
        leaf = hash_partition(rows, contract, key=key)
        return PreparedPart(key, leaf.hash, leaf.rows, parquet_bytes(rows))

    def store_part(self, attempt: str, part: PreparedPart, contract: Contract) -> BuiltPart:
        """Stage and promote a prepared part, then report it (on the calling thread)."""
        name = f"part-{hashlib.sha256(part.key.encode()).hexdigest()[:24]}.parquet"
        try:
            self.store.stage(attempt, name, part.data)
            size = part.size
        finally:
            part.discard()
        digest = self.store.promote(attempt, name)
        self.on_step(BuildStep.PART_WRITTEN, part.key)
        release_free_memory()  # the prepared parts' freed texts and copies go back to the system, not into the next part's peak
        return BuiltPart(key=part.key, hash=part.hash, rows=part.rows, object=digest, bytes=size, schema_hash=contract.schema_hash)

    def write_parts(self, attempt: str, partitions: Sequence[tuple[str, Rows]], contract: Contract) -> list[BuiltPart]:
        """Every part, in partition order; with ``jobs`` > 1, up to ``jobs`` partitions prepared at once on threads.

        Store calls, ``on_step`` events and the first error are the serial build's (parallel_parts.py).
        """
        if self.jobs <= 1 or len(partitions) < 2:
            return [self.write_part(attempt, key, table, contract) for key, table in partitions]
        with ordered_map(lambda item: self.prepare_part(item[0], item[1], contract), partitions, self.jobs) as prepared:
            return list(map(lambda part: self.store_part(attempt, part, contract), prepared))  # no stored part's bytes kept alive

    def reconcile(self, request_id: str) -> Realization | None:
        """What a request id already produced: the published realization, if any (ask before retrying)."""
        found = self.registry.find_by_request_id(request_id)
        if found is not None and found.state in (RealizationState.PUBLISHED, RealizationState.ELIGIBLE):
            return found
        return None

    def build(self, request: BuildRequest) -> BuildResult:
        candidate, attempt = self.begin(request)
        return self.finish(candidate, attempt, request, self.write_parts(attempt, request.partitions, request.contract))

    def begin(self, request: BuildRequest) -> tuple[int, str]:
        """The builder's role checked, the candidate created (and its builder recorded); the candidate and its staging attempt id.

        A fanned-out build (fanout.py) writes the parts of one attempt from several processes, then calls :meth:`finish`.
        """
        logical_key = request.logical_key or request.request_id
        scope = f"{request.dataset}:{request.version}"
        if self.gate is not None:
            self.gate.require(Role.BUILDER, definition=scope)
        candidate = self.registry.create_candidate(request.dataset, request.version, request.request_id, logical_key, self.actor)
        if self.gate is not None:
            self.gate.record_builder(candidate)
        self.on_step(BuildStep.CANDIDATE, str(candidate))
        attempt = f"c{candidate}-{uuid.uuid4().hex[:12]}"
        keys = [k for k, _ in request.partitions]
        if len(set(keys)) != len(keys):
            dup = sorted(k for k in keys if keys.count(k) > 1)[0]
            self.registry.transition(candidate, RealizationState.FAILED, reason=f"two parts claim partition {dup!r}", actor=self.actor)
            raise PublicationError(f"{request.dataset}:{request.version}: two parts claim partition {dup!r}")
        return candidate, attempt

    def finish(self, candidate: int, attempt: str, request: BuildRequest, parts: list[BuiltPart]) -> BuildResult:
        """Seal the candidate with ``parts`` (in partition order), run the gates, publish and move the alias."""
        contract = request.contract
        scope = f"{request.dataset}:{request.version}"
        manifest = build_manifest(
            parts,
            dataset=request.dataset,
            version=request.version,
            schema_hash=contract.schema_hash,
            contract=contract.to_document(),
            **dict(request.manifest_fields),
        )
        self.registry.seal(candidate, manifest, actor=self.actor)
        self.on_step(BuildStep.SEALED, manifest.manifest_hash)
        gates = list(request.gates(manifest, dict(request.partitions)) if request.gates else [])
        report = report_of(manifest.manifest_hash, gates)
        report_object = self.store.put(report.canonical_bytes())
        self.registry.record_lineage(
            [("quality_report", report_object, "realization", manifest.manifest_hash, "reports_on", {"passed": report.passed})], actor=self.actor
        )
        self.on_step(BuildStep.GATES_RUN, report_object)
        if not report.passed:
            names = ", ".join(g.name for g in report.failed if g.blocking)
            self.registry.transition(candidate, RealizationState.FAILED, reason=f"blocking gate(s) failed: {names}", actor=self.actor)
            self.store.abandon(attempt)
            fixes = "".join(f"; {g.name}: {g.detail.get('observed')}, fix: {g.detail['fix']}" for g in report.failed if g.blocking and "fix" in g.detail)
            message = f"{request.dataset}:{request.version}: blocking gate(s) failed: {names} (quality report object {report_object}){fixes}"
            raise GatesFailedError(message, report=report, report_object=report_object)
        if self.gate is not None:  # a builder without the publisher role leaves a SEALED candidate: staging only
            self.gate.require(Role.PUBLISHER, definition=scope)
        card = self.store_card(request, manifest, report_object)
        outcome = self.publish_beside_gc(candidate, request, manifest, report_object, parts, card)  # audited in its transaction
        if outcome.realization.manifest_hash == manifest.manifest_hash:  # lineage the pipeline itself writes
            record_realization_lineage(self.registry, manifest, outcome.realization.ref, actor=self.actor)
        self.on_step(BuildStep.PUBLISHED, outcome.realization.ref)
        self.store.abandon(attempt)
        if request.alias:
            self.move_alias(outcome.realization, request.alias)
        return BuildResult(outcome.realization, manifest, outcome, report, report_object)

    def store_card(self, request: BuildRequest, manifest: Manifest, report_object: str) -> str | None:
        """Store the request's dataset card beside the quality report (kept as long as the realization); its object, or None."""
        if request.card is None:
            return None
        card = self.store.put(request.card(manifest, report_object))
        self.registry.record_lineage([("object", card, "realization", manifest.manifest_hash, "documents", {"dataset_card": True})], actor=self.actor)
        return card

    def publish_beside_gc(
        self, candidate: int, request: BuildRequest, manifest: Manifest, report_object: str, parts: list[BuiltPart], card: str | None = None
    ) -> PublishOutcome:
        """Publish; while a GC batch deletes objects the manifest names, wait for it and re-put them (adapters/registry/collection.py).

        After publishing, no GC batch can claim the manifest's objects; one that finished before may have deleted
        some that ``put`` found present, so every part is checked and re-put from the request's rows.
        """
        deadline = time.monotonic() + GC_WAIT_S
        while True:
            try:
                outcome = self.publish(candidate, request.request_id, manifest, report_object, card)
                break
            except ObjectsBeingCollectedError as exc:  # publish again once GC released them; what went is re-put below
                while self.registry.deletions_pending(exc.digests):
                    if time.monotonic() > deadline:
                        raise PublicationError(f"{exc}; GC kept them claimed for {GC_WAIT_S:.0f} s") from exc
                    time.sleep(0.05)
        self.restore_parts(request, parts)
        return outcome

    def restore_parts(self, request: BuildRequest, parts: list[BuiltPart]) -> list[str]:
        """Re-put every part whose object is missing (deleted by GC between our put and our publication); their keys."""
        missing = [p for p in parts if not self.store.exists(p.object)]
        tables = dict(request.partitions)
        for part in missing:
            prepared = self.prepare_part(part.key, tables[part.key], request.contract)
            try:
                digest = self.store.put(prepared.data)
            finally:
                prepared.discard()
            if digest != part.object:
                raise PublicationError(f"partition {part.key}: re-encoding gave object {digest}, not {part.object}; the part cannot be restored")
            self.on_step(BuildStep.PART_WRITTEN, f"{part.key} (restored after GC)")
        return [p.key for p in missing]

    def publish(self, candidate: int, request_id: str, manifest: Manifest, report_object: str, card: str | None = None) -> PublishOutcome:
        """The conditional insert; with a signer, the signed statement's envelope is stored first and recorded in the same transaction."""
        if self.signer is None:
            outcome = self.registry.publish(candidate, request_id, actor=self.actor)
            if self.gate is not None and outcome.created:  # unsigned: no publication transaction of ours to write it in
                self.gate.audit("publish", outcome.realization.ref, detail={"request_id": request_id})
            return outcome
        records = TrustRecords.of(self.registry)
        builder = records.builder_of(candidate) or self.registry.get(candidate).created_by
        head = records.audit_head()  # the statement signs the log's head: a cut or rewrite behind it is detected (docs/trust.md)
        launch = records.launch_of(candidate)  # the statement signs the launch too: a changed builder or launch row is UNTRUSTED at approval
        signature = sign_realization(self.signer, self.store, manifest, builder=builder, quality_report=report_object, audit_head=head,
                                     dataset_card=card, launch=launch_document(launch))  # fmt: skip
        edge = ("object", signature.envelope_object, "realization", manifest.manifest_hash, "signs", {"keyid": signature.keyid})
        self.registry.record_lineage([edge], actor=self.actor)  # GC keeps the envelope as long as the realization
        who = None if self.gate is None else self.gate.identity
        return self.registry.publish_signed(candidate, request_id, signature, actor=self.actor, audit_as=who)

    def move_alias(self, realization: Realization, alias: str, *, attempts: int = 5) -> None:
        """Point ``alias`` at ``realization`` by compare-and-swap, retrying on a lost race."""
        assert realization.manifest_hash is not None
        if self.gate is not None:  # moving a name is publishing: an upstream writer cannot move a pointer
            self.gate.require(Role.PUBLISHER, definition=f"{realization.dataset}:{realization.version}")
        target = realization.manifest_hash
        gave_up = PublicationError(f"alias {alias!r} of {realization.dataset}:{realization.version} kept moving; gave up after {attempts} attempts")

        def swap(_: int) -> None:
            current = self.registry.get_alias(realization.dataset, realization.version, alias)
            expect = current.target if current else None
            if expect == target:
                return
            who = None if self.gate is None else self.gate.identity  # audited in the move's own transaction
            self.registry.set_alias(realization.dataset, realization.version, alias, target, expect=expect, actor=self.actor, audit_as=who)
            self.on_step(BuildStep.ALIAS_MOVED, f"{alias} -> {target}")

        retry(swap, attempts=attempts, again=lambda e: isinstance(e, AliasConflictError), exhausted=lambda _: gave_up)
