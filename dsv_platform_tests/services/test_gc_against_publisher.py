"""Issue 25 item 1: GC never deletes an object a publication that raced it needs (SQLite and PostgreSQL; local and S3 stores).

Before: ``apply_plan`` re-read the registry only every 200 deletions. A build whose parts equal collectable
objects (``put`` is a no-op: the object exists) and that published between two checks lost them: the new head
answered CORRUPT, and an idempotent rebuild did not heal it (SAME_MANIFEST, no re-put). Now every GC batch is
claimed in the registry first (its watermark checked in the same transaction), a publication naming a claimed
object waits for the batch and re-puts what went, and a publisher re-puts any part a finished batch deleted.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.objects.object_store import ObjectStore
from dsv_platform.adapters.objects.s3_store import S3ObjectStore
from dsv_platform.adapters.registry.collection import ObjectsBeingCollectedError
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.errors import PublicationError
from dsv_platform.core.publication.gates import rows_at_least
from dsv_platform.services.publication.datasets import Dataset, load_manifest
from dsv_platform.services.publication.publisher import BuildResult, BuildStep, Publisher
from dsv_platform.services.retention import gc
from dsv_platform.services.retention.gc_apply import GcPlanStaleError
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]


@pytest.fixture
def reg(backend_url: str) -> Iterator[Registry]:
    r = Registry.from_url(backend_url)
    pw.register(r)
    yield r
    r.close()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """A local folder, or a bucket on the loopback S3 server (where a batch of deletions takes longest)."""
    if request.param == "local":
        return LocalObjectStore(tmp_path / "objects", fsync=False)
    server = request.getfixturevalue("s3_server")
    bucket = request.getfixturevalue("s3_bucket")
    return S3ObjectStore(
        bucket, f"gc/{uuid.uuid4().hex[:8]}", endpoint_url=server.endpoint_url, region=server.region, access_key=server.access_key, secret_key=server.secret_key
    )


def _failed_build(reg: Registry, store: ObjectStore) -> list[str]:
    """A build whose gate fails: its parts stay in the store, collectable once past the safety window."""
    with pytest.raises(PublicationError, match="blocking gate"):
        pw.build(reg, store, "r-failed", parts=pw.partitions(seed=3), gates=lambda m, p: [rows_at_least(m.rows, 10**9)])
    return [o.digest for o in store.iter_objects()]


def _readable(reg: Registry, store: ObjectStore, result: BuildResult) -> str:
    realization = reg.resolve_ref(result.realization.ref)
    return Dataset(realization, load_manifest(reg, realization), store).verify_content()


def test_a_build_publishing_during_a_gc_batch_keeps_every_object(reg: Registry, store: ObjectStore) -> None:
    failed_objects = _failed_build(reg, store)
    plan = gc.plan(reg, store, now=datetime.now(UTC) + timedelta(days=2))
    doomed = {d.id for d in plan.collectable("delete_object")}
    assert doomed and set(failed_objects) >= doomed
    sealed = threading.Event()
    outcome: dict[str, object] = {}

    def rebuild() -> None:  # the same rows as the failed build: every part's put finds its object present
        def on_step(step: BuildStep, detail: str) -> None:
            if step is BuildStep.GATES_RUN:
                sealed.set()

        try:
            outcome["result"] = Publisher(reg, store, actor="builder", on_step=on_step).build(pw.request("r-new", parts=pw.partitions(seed=3)))
        except BaseException as exc:  # reported by the assertion below
            outcome["error"] = exc
            sealed.set()

    builder = threading.Thread(target=rebuild)

    def interleave(name: str, detail: str) -> None:  # the step hook: after GC's first deletion, a build runs up to its publication
        if name == "object_deleted" and not builder.is_alive() and "result" not in outcome:
            builder.start()
            assert sealed.wait(120), "the rebuild never reached its publication"

    with contextlib.suppress(GcPlanStaleError):  # the registry changed under GC: it stopped at a batch boundary, also safe
        gc.apply_plan(plan, registry=reg, store=store, dry_run=False, on_step=interleave)
    builder.join(120)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    assert isinstance(result, BuildResult)
    assert _readable(reg, store, result) == result.manifest.content_hash
    assert all(store.exists(p.object) for p in result.manifest.partitions)
    assert reg.deletions_pending(doomed) == []


def test_a_publication_naming_an_object_gc_is_deleting_is_refused_until_gc_releases_it(reg: Registry, store: ObjectStore) -> None:
    publisher = Publisher(reg, store, actor="builder")
    request = pw.request("r-1")
    candidate = reg.create_candidate(pw.NAME, pw.VERSION, "r-1", "r-1", "builder")
    parts = publisher.write_parts("attempt-1", request.partitions, request.contract)
    from dsv_platform.core.publication.manifest import build_manifest

    manifest = build_manifest(parts, dataset=pw.NAME, version=pw.VERSION, schema_hash=request.contract.schema_hash, contract=request.contract.to_document())
    reg.seal(candidate, manifest, actor="builder")
    objects = [p.object for p in parts]
    reg.claim_for_deletion(objects[:1], watermark=reg.state_watermark(), actor="gc")
    with pytest.raises(ObjectsBeingCollectedError, match="being deleted by GC") as refused:
        reg.publish(candidate, "r-1", actor="builder")
    assert refused.value.digests == (objects[0],)
    with pytest.raises(Exception, match="changed since the GC plan"):  # a claim against an old watermark is refused
        reg.claim_for_deletion(objects[1:], watermark={"stale": True}, actor="gc")
    reg.release_deletion(objects[:1])
    assert reg.publish(candidate, "r-1", actor="builder").created


def test_an_idempotent_rebuild_re_puts_parts_that_went_missing(reg: Registry, store: ObjectStore) -> None:
    first = pw.build(reg, store, "r-a", parts=pw.partitions(seed=5))
    lost = first.manifest.partitions[0].object
    store.delete(lost)  # as a GC batch that finished between the rebuild's put and its publication would have
    again = pw.build(reg, store, "r-b", parts=pw.partitions(seed=5))
    assert again.manifest.manifest_hash == first.manifest.manifest_hash and store.exists(lost)
    assert _readable(reg, store, again) == first.manifest.content_hash
