"""OpenLineage run events for landing, canonical load, label build, dataset build and model training.

Each use case is wrapped once (:func:`emits`): START before it runs, COMPLETE with its inputs and
outputs after, FAIL with the error message if it raises (the error still propagates). The
datasets are the nodes of our own lineage (raw batch, Iceberg snapshot, realization, model run)
named as in docs/interop.md: in the namespace ``dsv://<registry>``, an Iceberg table by its location. Off (``Settings.openlineage``),
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
from urllib.parse import unquote, urlsplit

from dsv_platform.adapters.lineage import openlineage as ol
from dsv_platform.adapters.lineage.openlineage import LineageDataset

if TYPE_CHECKING:
    from dsv_platform.adapters.objects.landing import LandingRecord
    from dsv_platform.bootstrap import Platform
    from dsv_platform.core.config.source import SourceSpec, TableSpecLike
    from dsv_platform.core.contracts.contract import Contract

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


def location_name(location: str) -> tuple[str, str]:
    """The OpenLineage (namespace, name) of a table at ``location``: ``file`` and the path, or ``s3://<bucket>`` and the key.

    As OpenLineage's naming spec and its Spark integration name an Iceberg table: by its location, scheme and
    authority (no credentials) the namespace, the path within it the name; ``s3a``/``s3n`` are ``s3``.
    """
    parts = urlsplit(location.rstrip("/"))
    if parts.scheme in ("", "file"):
        return FILE_NAMESPACE, unquote(parts.path)
    scheme = "s3" if parts.scheme in ("s3a", "s3n") else parts.scheme
    return f"{scheme}://{parts.netloc.rpartition('@')[2]}", unquote(parts.path).lstrip("/")


def snapshot(platform: Platform, spec: TableSpecLike, snapshot_id: int, **extra: Any) -> LineageDataset:
    """``iceberg_snapshot:<table>@<id>`` as the Iceberg table at its location (:func:`location_name`) at version ``<id>``.

    Its ``symlinks`` facet keeps the name used before, ``<catalog namespace>.<table>`` in ``dsv://<registry>`` (docs/interop.md).
    """
    tables = platform.tables
    node = f"iceberg_snapshot:{spec.name}@{snapshot_id}"
    facet = {"node": node, "kind": "iceberg_snapshot", "table": spec.name, "snapshot_id": snapshot_id, "schema_hash": spec.contract.schema_hash, **extra}
    ns, name = location_name(tables.table(spec).metadata.location)
    old = (namespace(platform), f"{tables.namespace}.{spec.name}")
    return LineageDataset(ns, name, str(snapshot_id), _schema(spec.contract), facet, symlinks=(old,))


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


__all__ = ["FILE_NAMESPACE", "IO", "Trace", "emits", "landing", "location_name", "namespace", "raw_batch", "snapshot"]
