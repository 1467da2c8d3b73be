"""OpenLineage run events for landing, canonical load, label build, dataset build and model training.

Each use case is wrapped once (:func:`emits`): START before it runs, COMPLETE with its inputs and
outputs after, FAIL with the error message if it raises (the error still propagates). The
datasets are the nodes of our own lineage (raw batch, Iceberg snapshot, realization, model run)
named as in docs/interop.md, in the namespace ``dsv://<registry>``. Off (``Settings.openlineage``),
this costs one attribute lookup per call; on, emission problems are warnings, never failures.

Details: docs/interop.md
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from dsv_platform.adapters.lineage import openlineage as ol
from dsv_platform.adapters.lineage.openlineage import LineageDataset
from dsv_platform.core.publication.refs import parse_ref

if TYPE_CHECKING:
    from dsv_platform.adapters.objects.landing import LandingRecord
    from dsv_platform.bootstrap import Platform
    from dsv_platform.core.config.dataset_definition import DatasetDefinition
    from dsv_platform.core.config.labels import LabelVersion
    from dsv_platform.core.config.source import SourceSpec, TableSpecLike
    from dsv_platform.core.contracts.contract import Contract
    from dsv_platform.services.ingest.canonical_load import LabelBuild, PartitionLoad
    from dsv_platform.services.publication.realization import RealizationBuild
    from dsv_platform.services.reproduction.model_run import ModelRun

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
FILE_NAMESPACE = "file"


def namespace(platform: Platform) -> str:
    """``dsv://<registry host and path>``: the registry is the one metadata authority, so it names the namespace (never its credentials)."""
    parts = urlsplit(platform.settings.registry_url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    path = parts.path if host else "/" + parts.path.lstrip("/")  # sqlite:////abs/registry.db -> /abs/registry.db
    return f"dsv://{host}{path}"


def _schema(contract: Contract) -> list[tuple[str, str]]:
    return [(c.name, c.type.value) for c in contract.columns]


def raw_batch(ns: str, record: LandingRecord) -> LineageDataset:
    """``raw_batch:<batch id>@<digest>`` as ``raw/<source>/<batch id>`` at version ``<digest>``."""
    node = f"raw_batch:{record.batch_ref}"
    facet = {"node": node, "kind": "raw_batch", "batch_ref": record.batch_ref, "digest": record.digest, "rows": record.rows, "source": record.source}
    return LineageDataset(ns, f"raw/{record.source}/{record.batch_id}", record.digest, (), facet)


def snapshot(platform: Platform, spec: TableSpecLike, snapshot_id: int, **extra: Any) -> LineageDataset:
    """``iceberg_snapshot:<table>@<id>`` as the Iceberg table ``<catalog namespace>.<table>`` at version ``<id>``."""
    tables = platform.tables
    node = f"iceberg_snapshot:{spec.name}@{snapshot_id}"
    facet = {"node": node, "kind": "iceberg_snapshot", "table": spec.name, "snapshot_id": snapshot_id, "schema_hash": spec.contract.schema_hash, **extra}
    return LineageDataset(namespace(platform), f"{tables.namespace}.{spec.name}", str(snapshot_id), _schema(spec.contract), facet)


def realization(platform: Platform, build: RealizationBuild) -> LineageDataset:
    """``realization:<manifest hash>`` as ``<dataset>:<version>`` at version ``<manifest hash>``."""
    m = build.manifest
    pins = [{"table": p.table, "snapshot_id": p.snapshot_id, "tag": p.tag} for p in build.pins]
    facet = {"node": f"realization:{m.manifest_hash}", "kind": "realization", "ref": build.ref, "manifest_hash": m.manifest_hash,
             "content_hash": m.content_hash, "rows": m.rows, "pinned_snapshots": pins, "reused": build.reused}  # fmt: skip
    if m.labels:
        facet["label_version"] = f"{m.labels.name}@{m.labels.version}"
    schema = [(str(c["name"]), str(c["type"])) for c in (m.to_document().get("contract") or {}).get("columns", [])]
    return LineageDataset(namespace(platform), f"{m.dataset}:{m.version}", m.manifest_hash, schema, facet)


def model(platform: Platform, run: ModelRun) -> LineageDataset:
    """``model_run:<run manifest hash>`` as ``model/<model>`` at version ``<run manifest hash>``."""
    facet = {"node": f"model_run:{run.run_hash}", "kind": "model_run", "run_manifest_hash": run.run_hash, "run_object": run.run_object,
             "trained_on": run.ref, "trained_on_manifest_hash": run.manifest_hash, "trained_on_content_hash": run.content_hash}  # fmt: skip
    return LineageDataset(namespace(platform), f"model/{run.model_name}", run.run_hash, (), facet)


@dataclass
class Trace:
    """One OpenLineage run: the job, then the datasets the use case read and wrote (filled in when it returns)."""

    platform: Platform
    job_name: str
    job_type: str
    run_id: str = field(default_factory=ol.new_run_id)
    inputs: Sequence[LineageDataset] = ()
    outputs: Sequence[LineageDataset] = ()

    def emit(self, state: str, error: str | None = None) -> bool:
        job = {"run_id": self.run_id, "job_namespace": namespace(self.platform), "job_name": self.job_name, "job_type": self.job_type}
        return ol.EMITTER.emit(state, **job, inputs=self.inputs, outputs=self.outputs, error=error)


IO = tuple[Sequence[LineageDataset], Sequence[LineageDataset]]


def emits(job: Callable[..., tuple[str, str]], datasets: Callable[..., IO]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap a use case ``f(platform, ...)``: ``job(*args)`` names the job and its type, ``datasets(result, *args)`` the inputs and outputs."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            platform = args[0] if args else kwargs.get("platform")
            if not getattr(getattr(platform, "settings", None), "openlineage", False):
                return fn(*args, **kwargs)
            trace = _safely(lambda: Trace(platform, *job(*args, **kwargs)))  # type: ignore[arg-type]
            if trace is not None:
                _safely(lambda: trace.emit("START"))
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                if trace is not None:
                    error = f"{type(exc).__name__}: {exc}"
                    _safely(lambda: trace.emit("FAIL", error=error))
                raise
            if trace is not None:
                io = _safely(lambda: datasets(result, *args, **kwargs))
                trace.inputs, trace.outputs = io if io is not None else ((), ())
                _safely(lambda: trace.emit("COMPLETE"))
            return result

        return traced

    return wrap


def _safely(step: Callable[[], R]) -> R | None:
    try:
        return step()
    except Exception as exc:  # lineage emission must never fail the pipeline
        log.warning("OpenLineage: event not emitted (%s: %s)", type(exc).__name__, exc)
        return None


# ---------------------------------------------------------------- the jobs


def landing(platform: Platform, spec: SourceSpec, files: Sequence[Path], land: Callable[[], list[LandingRecord]]) -> list[LandingRecord]:
    """Run ``land`` (storing ``files`` write-once) as the job ``land.<source>``: source files in, raw batches out."""

    @emits(lambda *_: (f"land.{spec.name}", "LANDING"), lambda landed, *_: _landing_io(platform, files, landed))
    def _land(platform: Platform) -> list[LandingRecord]:
        return land()

    return _land(platform)


def _landing_io(platform: Platform, files: Sequence[Path], landed: Iterable[LandingRecord]) -> tuple[list[LineageDataset], list[LineageDataset]]:
    inputs = [LineageDataset(FILE_NAMESPACE, str(Path(f).resolve())) for f in files]
    outputs = {r.batch_ref: raw_batch(namespace(platform), r) for r in landed if r.loadable}
    return inputs, list(outputs.values())


def load_job(platform: Platform, spec: SourceSpec, day: Any) -> tuple[str, str]:
    return f"canonical_load.{spec.name}", "CANONICAL_LOAD"


def load_io(load: PartitionLoad, platform: Platform, spec: SourceSpec, day: Any) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """Inputs: the batches that made snapshots; output: the table at the partition's snapshot, each append in the ``dsv`` facet."""
    made = [b for b in load.batches if b.outcome.appended and b.outcome.snapshot_id is not None]
    ns = namespace(platform)
    if load.snapshot_id is None:
        return [raw_batch(ns, b.record) for b in made], []
    appends = [{"batch": b.record.batch_ref, "snapshot_id": b.outcome.snapshot_id} for b in made]
    parent = platform.tables.snapshot_parent(spec, load.snapshot_id)
    out = snapshot(platform, spec, load.snapshot_id, parent_snapshot_id=parent, partition=str(load.day), content_hash=load.digest.content_hash, appends=appends)
    return [raw_batch(ns, b.record) for b in made], [out]


def label_job(platform: Platform, label: LabelVersion, **_: Any) -> tuple[str, str]:
    return f"label_build.{label.name}.v{label.version}", "LABEL_BUILD"


def label_io(build: LabelBuild, platform: Platform, label: LabelVersion, **_: Any) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """Inputs: the input sources at their current snapshots (as the lineage records them); output: the label table's new snapshot."""
    from dsv_platform.services.ingest.canonical_load import label_table_spec

    tables = platform.tables
    if build.outcome is None or not build.outcome.appended or build.outcome.snapshot_id is None:
        return [], []
    specs = [platform.config.sources[name] for name in label.inputs]
    inputs = [snapshot(platform, s, sid) for s in specs for sid in [tables.current_snapshot_id(s)] if sid is not None]
    spec, sid = label_table_spec(label), build.outcome.snapshot_id
    out = snapshot(platform, spec, sid, parent_snapshot_id=tables.snapshot_parent(spec, sid), label_version=label.ref, content_hash=build.digest.content_hash)
    return inputs, [out]


def realization_job(platform: Platform, definition: DatasetDefinition, **_: Any) -> tuple[str, str]:
    return f"dataset_build.{definition.name}.{definition.version}", "DATASET_BUILD"


def realization_io(build: RealizationBuild, platform: Platform, definition: DatasetDefinition, **_: Any) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """Inputs: every pinned snapshot (with its tag); output: the realization."""
    specs = {**platform.config.sources, **{s.name: s for s in _label_specs(platform)}}
    inputs = [snapshot(platform, specs[p.table], p.snapshot_id, tag=p.tag) for p in build.pins if p.table in specs]
    return inputs, [realization(platform, build)]


def _label_specs(platform: Platform) -> list[TableSpecLike]:
    from dsv_platform.services.ingest.canonical_load import label_table_spec

    return [label_table_spec(v) for versions in platform.config.labels.values() for v in versions.values()]


def training_job(platform: Platform, ref: str, *, model_name: str, **_: Any) -> tuple[str, str]:
    return f"train.{model_name}", "MODEL_TRAINING"


def training_io(run: ModelRun, platform: Platform, ref: str, **_: Any) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """Input: the realization trained on (by its manifest hash); output: the model run."""
    parsed = parse_ref(run.ref)
    facet = {"node": f"realization:{run.manifest_hash}", "kind": "realization", "ref": run.ref,
             "manifest_hash": run.manifest_hash, "content_hash": run.content_hash}  # fmt: skip
    trained_on = LineageDataset(namespace(platform), f"{parsed.name}:{parsed.version}", run.manifest_hash, (), facet)
    return [trained_on], [model(platform, run)]


__all__ = ["FILE_NAMESPACE", "Trace", "emits", "landing", "namespace"]
