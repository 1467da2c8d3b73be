"""Producing an artifact (a report, figure, backtest) from pinned realizations, and finding it again by its footer.

:func:`produce_artifact` writes an INTENT run before any input is opened, opens
every input by reference (re-hashing it), computes under the producer's pinned
TZ, writes the dsv-artifact/1 manifest, renders the files with the footer,
stores everything content-addressed, links lineage (``realization --used-->
artifact:<hash>``), registers an ``artifact`` retention root and completes the
run; the inputs' source snapshots are pinned as ``report-<name>-<hash12>`` (dependent_pins.py) before the root.
An exception marks the run FAILED; a crash leaves it INTENT.
Details: docs/artifacts.md
"""

from __future__ import annotations

import datetime as dt
import json
import platform as host
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.adapters.registry.artifacts import ARTIFACT, RunRecord, RunRecords
from dsv_platform.core import canonical_json
from dsv_platform.core.config.timezones import tz_database
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.reproduction.artifact_manifest import (
    ArtifactManifestError,
    Producer,
    build_manifest,
    footer,
    manifest_hash,
    validate_manifest,
)
from dsv_platform.services.lineage.lineage import record_artifact_lineage
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.services.reproduction import code_pins
from dsv_platform.services.reproduction.code_pins import import_path, lockfile_sha256
from dsv_platform.services.reproduction.dependent_pins import pin_for, source_snapshots

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

Clock = Callable[[], dt.datetime]


@dataclass(frozen=True)
class ArtifactRecord:
    """A complete artifact: its manifest (document and hash) and files ``{name: object digest}``; ``state`` of its run."""

    name: str
    run_id: int
    manifest_hash: str
    manifest: dict[str, Any]
    files: dict[str, str]
    state: str
    produced_at: str

    @property
    def footer(self) -> str:
        return footer(self.manifest_hash)

    def to_document(self) -> dict[str, Any]:
        return {
            "artifact": self.name,
            "run_id": self.run_id,
            "manifest_hash": self.manifest_hash,
            "footer": self.footer,
            "state": self.state,
            "produced_at": self.produced_at,
            "files": dict(self.files),
            "manifest": self.manifest,
        }


@dataclass(frozen=True)
class ArtifactRun:
    """What :func:`produce_artifact` made: the record, the retention root and the rendered files' bytes."""

    record: ArtifactRecord
    retention_root: int
    rendered: Mapping[str, bytes]
    pins: tuple[Any, ...] = ()  # the PinnedSnapshot tags named for it, one per input source snapshot

    @property
    def manifest_hash(self) -> str:
        return self.record.manifest_hash

    @property
    def manifest(self) -> dict[str, Any]:
        return self.record.manifest

    @property
    def results(self) -> dict[str, Any]:
        return dict(self.record.manifest["results"])


def utc_iso(moment: dt.datetime) -> str:
    """ISO-8601 UTC ending in ``Z`` (a naive time is refused)."""
    if moment.tzinfo is None:
        raise ArtifactManifestError(f"times must be timezone-aware, got naive {moment!r}")
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def code_pin_of(producer: Any, code: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The producer's own checkout ``{repo, commit, dirty}`` (``code`` overrides any of them, for tests)."""
    pin = code_pins.checkout_of(code_pins.module_file(producer))
    return {**pin, **dict(code or {})}


def environment_of(producer: Producer, code: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "lockfile_sha256": lockfile_sha256(str(code["repo"]), str(code["commit"])),
        "python": host.python_version(),
        "runner_timezone": producer.runner_timezone,
        "tz_database": tz_database(producer.zones),
    }


def _check_inputs(inputs: Mapping[str, str]) -> None:
    if not inputs:
        raise ArtifactManifestError("an artifact needs at least one input (dataset name:version -> ref)")
    for dataset, ref in inputs.items():
        parsed = parse_ref(ref)
        if f"{parsed.name}:{parsed.version}" != dataset:
            raise ArtifactManifestError(f"input {dataset!r}: ref {ref!r} names {parsed.name}:{parsed.version}, not {dataset}")


def produce_artifact(
    platform: Platform,
    producer: Producer,
    *,
    inputs: Mapping[str, str],
    parameters: Mapping[str, Any],
    seed: int,
    watermark: dt.datetime | str | None = None,
    clock: Clock | None = None,
    code: Mapping[str, Any] | None = None,
    actor: str | None = None,
) -> ArtifactRun:
    """Produce ``producer``'s artifact from ``inputs`` (``name:version`` -> ref); see the module docstring for the order."""
    who = platform.actor  # the proven identity; ``actor`` is kept for callers, never recorded
    now = clock or (lambda: dt.datetime.now(dt.UTC))
    _check_inputs(inputs)
    pin = code_pin_of(producer, code)
    env = environment_of(producer, pin)
    path = import_path(producer)
    mark = utc_iso(watermark) if isinstance(watermark, dt.datetime) else watermark
    intent = {"artifact": producer.name, "producer": path, "inputs": dict(inputs), "parameters": dict(parameters), "seed": seed,
              "watermark": mark, "code": pin, "environment": env}  # fmt: skip
    runs = RunRecords(platform.registry)
    run_id = runs.start(ARTIFACT, producer.name, producer=path, intent=intent, actor=who, at=now())
    try:
        return _produce(platform, producer, runs, run_id, intent, who, now)
    except BaseException as exc:
        runs.fail_during(run_id, exc, at=now())
        raise


def _produce(platform: Platform, producer: Producer, runs: RunRecords, run_id: int, intent: Mapping[str, Any], who: str, now: Clock) -> ArtifactRun:
    tables: dict[str, pa.Table] = {}
    pinned: list[dict[str, str]] = []
    sources: list[tuple[str, int]] = []
    for dataset, ref in sorted(intent["inputs"].items()):
        with open_dataset(platform, ref, actor=who) as ds:
            tables[dataset] = ds.to_arrow()
            pinned.append({"dataset": dataset, "ref": ref, "snapshot_id": ds.manifest_hash, "dataset_hash": ds.content_hash})
            sources += source_snapshots(ds.manifest)
    with platform.pinned_timezone(producer.runner_timezone):
        results = producer.compute(tables, intent["parameters"], intent["seed"])
    produced_at = utc_iso(now())
    doc = build_manifest(
        artifact=producer.name,
        produced_at=produced_at,
        produced_by={"identity": who, "producer": intent["producer"]},
        code=intent["code"],
        environment=intent["environment"],
        inputs=pinned,
        parameters=intent["parameters"],
        seed=intent["seed"],
        watermark=intent["watermark"],
        results=results,
        precision=producer.precision,
    )
    mh = manifest_hash(doc)
    store = platform.store
    stored = store.put(canonical_json.dumps(doc))
    if stored != mh:
        raise CorruptError(f"the artifact manifest was stored as {stored}, not under its hash {mh}", detail={"manifest_hash": mh})
    with platform.pinned_timezone(producer.runner_timezone):
        rendered = producer.render(tables, results, footer(mh))
    bad = sorted(name for name, data in rendered.items() if not isinstance(name, str) or not isinstance(data, bytes | bytearray))
    if bad:
        raise ArtifactManifestError(f"{intent['producer']}.render must return {{file name: bytes}}; not bytes: {bad}")
    files = {name: store.put(bytes(data)) for name, data in sorted(rendered.items())}
    record_artifact_lineage(platform.registry, mh, pinned, files, artifact=producer.name, actor=who)
    pins = pin_for(platform, ("artifact", mh), producer.name, sources)
    reason = f"{producer.name} produced at {produced_at} (run #{run_id}, manifest object {mh})"
    root = platform.registry.add_retention_root("artifact", f"artifact:{mh}", reason, who)
    done = runs.complete(run_id, manifest_hash=mh, manifest=doc, files=files, at=now())
    return ArtifactRun(_record(done), root, dict(rendered), pins)


def _record(run: RunRecord) -> ArtifactRecord:
    if run.manifest is None or run.manifest_hash is None:
        raise NotFoundError(f"artifact run #{run.id} of {run.name} is {run.state}: it produced nothing", detail={"run_id": run.id})
    doc = dict(run.manifest)
    if manifest_hash(doc) != run.manifest_hash:
        raise CorruptError(f"artifact manifest of run #{run.id} does not hash to {run.manifest_hash}", detail={"manifest_hash": run.manifest_hash})
    validate_manifest(doc)
    return ArtifactRecord(run.name, run.id, run.manifest_hash, doc, dict(run.files), run.state, str(doc["produced_at"]))


def artifact_runs(platform: Platform, name: str | None = None) -> list[RunRecord]:
    """Every artifact run newest first, INTENT and FAILED ones included (those never count as produced)."""
    return RunRecords(platform.registry).runs(kind=ARTIFACT, name=name)


def locate_artifact(platform: Platform, name_or_hash: str) -> ArtifactRecord:
    """The complete artifact a full manifest hash, a footer (prefix of >= 12 hex) or a name (its newest complete run) names.

    No manifest means "not reproducible by construction": a typed NotFoundError, never an approximation.
    """
    return _record(RunRecords(platform.registry).locate(ARTIFACT, name_or_hash))


def load_manifest_object(platform: Platform, digest: str) -> dict[str, Any]:
    """The artifact manifest as stored in the object store under its hash (what a reproduction reads), checked."""
    doc = json.loads(platform.store.get(digest))
    if manifest_hash(doc) != digest:
        raise CorruptError(f"artifact manifest object {digest} is not canonical for its hash", detail={"manifest_hash": digest})
    return validate_manifest(doc)


__all__ = ["ArtifactRecord", "ArtifactRun", "artifact_runs", "load_manifest_object", "locate_artifact", "produce_artifact", "utc_iso"]
