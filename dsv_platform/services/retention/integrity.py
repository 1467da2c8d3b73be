"""Do the registry and the object store agree? The integrity scan kill-safety tests (and operators) run after a crash.

It reports ``missing`` objects that a readable realization needs and ``orphaned`` things
nothing live names (only beyond the safety window: younger ones may belong to a build in flight).

Details: docs/gc-and-privacy.md
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import ObjectStoreError
from dsv_platform.core.lineage.lineage import manifest_edges
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.retention.gc import Action, GcPolicy, Inventory, plan_gc
from dsv_platform.core.retention.policy import DEFAULT_SAFETY_WINDOW
from dsv_platform.services.retention.gc import collect_inventory

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

S = RealizationState
READABLE = {S.PUBLISHED.value, S.ELIGIBLE.value}
IN_FLIGHT = {S.STAGING.value, S.SEALED.value}
_DIGEST = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class IntegrityReport:
    missing: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    checked_objects: int = 0

    @property
    def ok(self) -> bool:
        return not self.missing and not self.orphaned

    def to_document(self) -> dict[str, Any]:
        return {"ok": self.ok, "missing": self.missing, "orphaned": self.orphaned, "checked_objects": self.checked_objects}


def scan(platform: Platform, *, now: datetime | None = None, safety_window: timedelta | None = None) -> IntegrityReport:
    """Compare what the registry names with what the platform's object store holds (see the module docstring)."""
    window = platform.config.options.gc.safety_window if safety_window is None else safety_window  # the one GC policy
    return scan_backends(platform.registry, platform.store, landing=platform.existing_landing(), now=now, safety_window=window)


def scan_backends(
    registry: Registry, store: ObjectStore, *, landing: LandingZone | None = None, now: datetime | None = None, safety_window: timedelta = DEFAULT_SAFETY_WINDOW
) -> IntegrityReport:
    now = now or datetime.now(UTC)
    horizon = now - safety_window
    inv = collect_inventory(registry, store, landing=landing, now=now, policy=GcPolicy(safety_window=safety_window))
    stored = {o.digest for o in inv.objects}
    required = _required(inv)
    missing = [f"object {d} ({why})" for d, why in sorted(required.items()) if d not in stored and not _present(store, d)]
    referenced = _referenced(inv) | set(required)
    # an object is orphaned only when nothing live names it AND GC would collect it: what GC keeps (the environment lock
    # a manifest pins, an artifact's files, ...) is never reported (issue 25 item 11)
    collectable = {d.id for d in plan_gc(inv, GcPolicy(safety_window=safety_window)).collectable(Action.DELETE_OBJECT.value)}
    orphaned = [
        f"object {o.digest}" for o in inv.objects
        if o.digest not in referenced and o.digest in collectable and o.modified_at is not None and o.modified_at < horizon
    ]  # fmt: skip
    orphaned += [f"staging {a.attempt_id}" for a in inv.staging if a.last_modified < horizon]
    orphaned += [f"candidate {r.id} ({r.state})" for r in inv.realizations if r.state in IN_FLIGHT and r.created_at < horizon]
    if isinstance(store, EncryptingObjectStore):
        orphaned += _sealed_orphans(store, horizon)
    return IntegrityReport(missing=missing, orphaned=sorted(orphaned), checked_objects=len(stored))


def _present(store: ObjectStore, digest: str) -> bool:
    try:
        return store.exists(digest)
    except ObjectStoreError:  # an erased or unreadable object is not present
        return False


def _state_of(inv: Inventory) -> dict[str, str]:
    """Manifest hash -> state of the realization holding it (the most alive state when several candidates share it)."""
    rank = {**{s: 0 for s in READABLE}, S.REDACTED.value: 1, S.EXPIRED.value: 3}
    out: dict[str, str] = {}
    for r in inv.realizations:
        if r.manifest_hash is not None and (r.manifest_hash not in out or rank.get(r.state, 2) < rank.get(out[r.manifest_hash], 2)):
            out[r.manifest_hash] = r.state
    return out


def _required(inv: Inventory) -> dict[str, str]:
    """Digest -> what needs it, for every readable realization."""
    states = _state_of(inv)
    out: dict[str, str] = {}
    for manifest_hash, doc in inv.manifests.items():
        if states.get(manifest_hash) not in READABLE:
            continue
        for edge in manifest_edges(manifest_hash, doc):
            if _DIGEST.match(edge.src_id) and edge.src_kind in ("object", "split_assignment"):
                out[edge.src_id] = f"{edge.src_kind} of realization {manifest_hash[:12]}"
    for edge in inv.lineage:
        if edge.src_kind == "quality_report" and states.get(edge.dst_id) in READABLE:
            out[edge.src_id] = f"quality report of realization {edge.dst_id[:12]}"
    return out


def _referenced(inv: Inventory) -> set[str]:
    """Every digest something live names: manifests of realizations that are not EXPIRED, recorded lineage, landed raw batches."""
    states = _state_of(inv)
    live = {h for h, st in states.items() if st != S.EXPIRED.value}
    out: set[str] = set()
    for manifest_hash in live & set(inv.manifests):
        out |= {e.src_id for e in manifest_edges(manifest_hash, inv.manifests[manifest_hash])}
    for edge in inv.lineage:
        if edge.src_kind == "quality_report" and states.get(edge.dst_id) == S.EXPIRED.value:
            continue
        out |= {edge.src_id, edge.dst_id} | set(_digests_in(edge.attributes))
    out |= {b.digest for b in inv.raw_batches}
    return {d for d in out if _DIGEST.match(d)}


def _digests_in(attributes: Mapping[str, Any]) -> Iterable[str]:
    return (str(v) for v in attributes.values() if isinstance(v, str) and _DIGEST.match(v))


def _sealed_orphans(store: EncryptingObjectStore, horizon: datetime) -> list[str]:
    """Ciphertexts no key store entry binds (erased ones stay bound), live keys with no or a lost ciphertext (past the window)."""
    out: list[str] = []
    bound: set[str] = set()
    for digest, sealed, when in _bindings(store):
        if sealed is not None:
            bound.add(sealed)
        old = when is None or when < horizon
        if sealed is None and old and not store.keys.is_erased(digest):
            out.append(f"key {digest} (bound to no ciphertext)")
        elif sealed is not None and not store.keys.is_erased(digest) and not store.sealed_store.exists(sealed):
            out.append(f"key {digest} (its ciphertext {sealed} is gone)")
    times = _mtimes(store.sealed_store)
    for info in store.sealed_store.iter_objects():
        when = times.get(info.digest)
        if info.digest not in bound and when is not None and when < horizon:
            out.append(f"ciphertext {info.digest} (no key binds it)")
    return out


def _bindings(store: EncryptingObjectStore) -> list[tuple[str, str | None, datetime | None]]:
    """(digest, ciphertext digest, key time) of every key store entry: live keys and bindings (the local key store's erased ones too)."""
    return [(d, sealed, when) for d, sealed, when in store.keys.bindings() if _DIGEST.match(d)]


def _mtimes(store: ObjectStore) -> dict[str, datetime]:
    from dsv_platform.services.retention.gc import _object_times

    return _object_times(store)


__all__ = ["IntegrityReport", "scan", "scan_backends"]
