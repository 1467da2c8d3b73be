"""A generated registry history for GC tests: realizations sharing objects, overlapping roots (registry rows + real objects)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.publication.manifest import BuiltPart, Manifest, build_manifest

NAME = "gc_set"


@dataclass
class History:
    published: list[tuple[int, Manifest]] = field(default_factory=list)
    failed: list[tuple[int, Manifest]] = field(default_factory=list)
    objects: dict[str, bytes] = field(default_factory=dict)


def generate(reg: Registry, store: LocalObjectStore, n: int, *, seed: int = 7, versions: tuple[str, ...] = ("v1", "v2")) -> History:
    rng = random.Random(seed)
    for v in versions:
        reg.register_definition(NAME, v, contract={"name": NAME}, recipe={"v": v}, owner="tests")
    pool = [store.put(f"shared object {i}".encode()) for i in range(max(4, n // 5))]
    h = History()
    for i in range(n):
        v = versions[i % len(versions)]
        own = store.put(f"object of {i}".encode())
        shared = rng.choice(pool)
        schema = "a" * 64
        parts = [BuiltPart("p0", format(i, "064x"), 1, own, 16, schema), BuiltPart("p1", format(i + 10**6, "064x"), 1, shared, 16, schema)]
        manifest = build_manifest(parts, dataset=NAME, version=v)
        rid = reg.create_candidate(NAME, v, f"req-{i}", f"lk-{i}", "tests")
        reg.seal(rid, manifest)
        if i % 10 == 9:
            from dsv_platform.core.publication.states import RealizationState

            reg.transition(rid, RealizationState.FAILED, reason="gate", actor="tests")
            h.failed.append((rid, manifest))
        else:
            reg.publish(rid, f"pub-{i}")
            h.published.append((rid, manifest))
    h.objects = {d: b"" for d in pool}
    return h


def objects_of(manifest: Manifest) -> set[str]:
    return {p.object for p in manifest.partitions}
