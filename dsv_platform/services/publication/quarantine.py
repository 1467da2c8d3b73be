"""Quarantine as an operator action: `dsv quarantine REF` and the two-person `dsv release REF` (docs/quarantine.md).

REF is a dataset reference (one realization) or a raw batch, ``raw:<source>/<batch id>``
(every landed revision of that batch id) or ``raw_batch:<batch id>@<digest>`` (one revision).
A raw batch's quarantine reaches every descendant lineage finds (impact analysis): the
realizations among them are quarantined, every descendant is listed in the record, and
canonical loading skips the batch from then on. A release is requested by one operator and
approved by another identity (operator or approver); each step is audited in its own transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.quarantine import ACTIVE, RELEASE_PENDING, QuarantineRecord, QuarantineRecords, QuarantineStateError
from dsv_platform.core.errors import AccessDeniedError, DsvError, NotFoundError, ResolutionError
from dsv_platform.core.lineage.lineage import NodeKind
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.lineage.lineage import lineage
from dsv_platform.services.publication.integrity_signals import stored_integrity_gates
from dsv_platform.services.trust.trust import current_identity, require

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

RAW_PREFIX = "raw:"
RAW_NODE_PREFIX = f"{NodeKind.RAW_BATCH.value}:"
REALIZATION = NodeKind.REALIZATION.value


@dataclass(frozen=True)
class Target:
    """What REF names: ``kind`` (realization | raw_batch), the record's target, the scope a grant may narrow to."""

    kind: str
    target: str
    ref: str
    batch_refs: tuple[str, ...] = ()
    landing: tuple[Mapping[str, Any], ...] = ()
    definition: str | None = None
    source: str | None = None


def records_of(platform: Platform) -> QuarantineRecords:
    return QuarantineRecords(platform.registry.engine)


def _raw_target(platform: Platform, ref: str) -> Target:
    if ref.startswith(RAW_NODE_PREFIX):
        batch_ref = ref.removeprefix(RAW_NODE_PREFIX)
        if "@" in batch_ref:
            found = [r for r in platform.landing.records() if r.batch_ref == batch_ref]
        else:  # the batch id alone: every landed revision of it, when one source holds it
            found = [r for r in platform.landing.records() if r.batch_id == batch_ref]
            sources = sorted({r.source for r in found})
            if len(sources) > 1:
                raise DsvError(f"{ref!r}: batch id {batch_ref!r} is landed by sources {sources}; name one: raw:<source>/{batch_ref}")
    else:
        source, sep, batch_id = ref.removeprefix(RAW_PREFIX).partition("/")
        if not sep or not source or not batch_id:
            raise DsvError(f"{ref!r}: a raw batch is raw:<source>/<batch id> or raw_batch:<batch id>@<digest>")
        found = [r for r in platform.landing.records(source) if r.batch_id == batch_id]
    if not found:
        raise NotFoundError(f"no landed raw batch {ref}", ref=ref)
    refs = tuple(sorted({r.batch_ref for r in found}))
    landing = tuple({**r.to_document(), "batch_ref": r.batch_ref, "writer": getattr(r, "writer", None)} for r in found)
    return Target("raw_batch", ref, ref, refs, landing, source=found[0].source)


def _manifest_hash_of(platform: Platform, ref: str) -> str:
    """The realization ``ref`` names, found even when it is quarantined (and so does not resolve)."""
    parsed = parse_ref(ref)
    if parsed.manifest_hash:
        return parsed.manifest_hash
    try:
        return platform.registry.resolve_ref(parsed, actor=platform.actor).manifest_hash or ""
    except ResolutionError as exc:
        mh = exc.detail.get("manifest_hash")
        if mh:
            return str(mh)
        raise


def resolve_target(platform: Platform, ref: str) -> Target:
    """REF as a quarantine target; NOT_FOUND when nothing has that name."""
    if ref.startswith((RAW_PREFIX, RAW_NODE_PREFIX)):
        return _raw_target(platform, ref)
    mh = _manifest_hash_of(platform, ref)
    r = platform.registry.find_by_manifest_hash(mh)
    if r is None:
        raise NotFoundError(f"no realization has manifest {mh}", ref=ref)
    return Target(REALIZATION, mh, r.ref, definition=f"{r.dataset}:{r.version}")


def _descendants(platform: Platform, target: Target) -> list[dict[str, Any]]:
    """Every node downstream of the target (impact analysis), each once, in walk order."""
    starts = [f"{RAW_NODE_PREFIX}{b}" for b in target.batch_refs] if target.kind == "raw_batch" else [f"{REALIZATION}:{target.target}"]
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    for start in starts:
        try:
            nodes = lineage(platform, start, impact=True)["nodes"]
        except NotFoundError:  # landed but never loaded: nothing downstream yet
            continue
        for n in nodes:
            if n["depth"] > 0 and n["node"] not in seen:  # the start node itself is the target, not a descendant
                seen.add(n["node"])
                found.append({k: n[k] for k in ("node", "kind", "id", "depth", "relation", "state", "ref") if k in n})
    return found


def _evidence(platform: Platform, target: Target, affected: list[dict[str, Any]], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the operator saw: the landing records, and the failed integrity signals of each realization involved."""
    findings = {}
    for mh in [a["id"] for a in affected if a["kind"] == REALIZATION]:  # a realization's own quarantine lists it first
        failed = [g.to_document() for g in stored_integrity_gates(platform, mh) if not g.passed]
        if failed:
            findings[mh] = failed
    evidence: dict[str, Any] = {"integrity_findings": findings}
    if target.kind == "raw_batch":
        evidence |= {"batch_refs": list(target.batch_refs), "landing": [dict(r) for r in target.landing]}
    return evidence | dict(extra or {})


def quarantine(platform: Platform, ref: str, *, reason: str, evidence: Mapping[str, Any] | None = None) -> QuarantineRecord:
    """Quarantine REF as the current identity (role ``operator``): record, evidence, descendants, audited."""
    target = resolve_target(platform, ref)
    who = current_identity(platform).name
    require(platform, Role.OPERATOR, definition=target.definition, source=target.source, identity=who)
    already = records_of(platform).records(kind=target.kind, target=target.target, active_only=True)
    if already:
        raise QuarantineStateError(f"{target.ref} is already quarantined (#{already[-1].id} by {already[-1].created_by}: {already[-1].reason})")
    affected = _descendants(platform, target)
    if target.kind == REALIZATION:
        affected.insert(0, {"node": f"{REALIZATION}:{target.target}", "kind": REALIZATION, "id": target.target, "depth": 0, "ref": target.ref})
    record = records_of(platform).create(
        target.kind, target.target, target.ref, reason=reason, actor=who, evidence=_evidence(platform, target, affected, evidence), affected=affected
    )
    return record


def _open_record(platform: Platform, target: Target, state: str) -> QuarantineRecord:
    """The quarantine of ``target`` in ``state`` (a realization held by a raw batch's quarantine names that one)."""
    records = records_of(platform).records(active_only=True)
    mine = [r for r in records if r.kind == target.kind and r.target == target.target]
    if not mine and target.kind == REALIZATION:
        holders = [r for r in records if r.covers(target.target)]
        if holders:
            names = ", ".join(f"#{r.id} {r.ref}" for r in holders)
            raise QuarantineStateError(f"{target.ref} is held by the quarantine of {names}: release that one")
    if not mine:
        raise NotFoundError(f"{target.ref} is not quarantined (no active quarantine record)", ref=target.ref)
    in_state = [r for r in mine if r.state == state]
    if not in_state:
        have = ", ".join(f"#{r.id} {r.state}" for r in mine)
        raise QuarantineStateError(
            f"{target.ref}: no quarantine {state} ({have}); " + ("approve it with --approve" if state == ACTIVE else "request a release first")
        )
    return in_state[-1]


@dataclass(frozen=True)
class ReleaseOutcome:
    record: QuarantineRecord
    step: str  # "requested" | "released"
    released: tuple[str, ...] = ()

    def to_document(self) -> dict[str, Any]:
        return {"step": self.step, "released": list(self.released), "quarantine": self.record.to_document()}


def _require_releaser(platform: Platform, target: Target, who: str) -> None:
    try:
        require(platform, Role.OPERATOR, definition=target.definition, source=target.source, identity=who)
    except AccessDeniedError:
        require(platform, Role.APPROVER, definition=target.definition, source=target.source, identity=who)


def release(platform: Platform, ref: str, *, reason: str, approve: bool = False) -> ReleaseOutcome:
    """Request the release of REF's quarantine (operator), or approve a requested one (``approve``: another operator or approver)."""
    target = resolve_target(platform, ref)
    who = current_identity(platform).name
    if not approve:
        require(platform, Role.OPERATOR, definition=target.definition, source=target.source, identity=who)
        record = records_of(platform).request_release(_open_record(platform, target, ACTIVE).id, identity=who, reason=reason)
        return ReleaseOutcome(record, "requested")
    _require_releaser(platform, target, who)
    record, released = records_of(platform).approve_release(_open_record(platform, target, RELEASE_PENDING).id, identity=who, reason=reason)
    return ReleaseOutcome(record, "released", tuple(released))


def quarantines(platform: Platform, *, active_only: bool = True) -> list[QuarantineRecord]:
    """The quarantine records (default: those not released), oldest first."""
    return records_of(platform).records(active_only=active_only)


def quarantine_of(platform: Platform, manifest_hash: str) -> QuarantineRecord | None:
    """The newest active quarantine holding the realization ``manifest_hash``, else None."""
    held = [r for r in quarantines(platform) if r.covers(manifest_hash)]
    return held[-1] if held else None


def quarantine_corrupt(platform: Platform, ref: str, manifest_hash: str, obj: str, error: str, *, actor: str) -> QuarantineRecord:
    """The integrity scan's quarantine of a realization whose object ``obj`` does not verify: recorded with its evidence, audited."""
    reason = f"integrity: object {obj}"
    entry = {"node": f"{REALIZATION}:{manifest_hash}", "kind": REALIZATION, "id": manifest_hash, "depth": 0, "ref": ref}
    evidence = {"object": obj, "error": error}
    return records_of(platform).create(REALIZATION, manifest_hash, ref, reason=reason, actor=platform.actor, evidence=evidence, affected=[entry])
