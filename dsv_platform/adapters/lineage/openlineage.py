"""OpenLineage run events through ``openlineage-python`` (the only module importing it); off unless configured.

Used only when ``Settings.openlineage`` is on (an ``OPENLINEAGE_*`` transport is configured); the
client then loads its own configuration (``OpenLineageClient()``). When off, the library is never
imported. Emitting never raises: a collector that does not answer is a warning, and emission
pauses for ``PAUSE_SECONDS``.

Details: docs/interop.md
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

PRODUCER = "https://github.com/dsv-platform/dsv_platform"
FACET_SCHEMA = "https://github.com/dsv-platform/dsv_platform/blob/main/docs/interop.md#the-dsv-dataset-facet"
PAUSE_SECONDS = 60.0


@dataclass(frozen=True)
class LineageDataset:
    """One dataset of a run event: OpenLineage namespace and name, its version, schema, the ``dsv`` facet fields and
    other names of the same dataset (``symlinks``: ``(namespace, name)`` pairs, each a ``TABLE`` identifier)."""

    namespace: str
    name: str
    version: str | None = None
    schema: Sequence[tuple[str, str]] = ()
    dsv: Mapping[str, Any] = field(default_factory=dict)
    symlinks: Sequence[tuple[str, str]] = ()


@functools.cache
def _facet_class() -> type:
    import attr
    from openlineage.client.facet_v2 import DatasetFacet

    @attr.define
    class DsvDatasetFacet(DatasetFacet):
        """Our identity of a dataset: the lineage node, hashes, snapshot ids, pins (fields absent when not applicable)."""

        node: str
        kind: str
        properties: dict[str, Any] = attr.field(factory=dict)

        @staticmethod
        def _get_schema() -> str:
            return FACET_SCHEMA

    return DsvDatasetFacet


def _facets(ds: LineageDataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import dataset_version_dataset, schema_dataset, symlinks_dataset

    facets: dict[str, Any] = {}
    if ds.version is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=ds.version, producer=PRODUCER)
    if ds.schema:
        fields = [schema_dataset.SchemaDatasetFacetFields(name=n, type=t) for n, t in ds.schema]
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)
    if ds.symlinks:
        ids = [symlinks_dataset.Identifier(namespace=ns, name=name, type="TABLE") for ns, name in ds.symlinks]
        facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(identifiers=ids, producer=PRODUCER)
    if ds.dsv:
        props = {k: v for k, v in ds.dsv.items() if k not in ("node", "kind") and v is not None}
        facets["dsv"] = _facet_class()(node=str(ds.dsv.get("node", "")), kind=str(ds.dsv.get("kind", "")), properties=props, producer=PRODUCER)
    return facets


def run_event(state: str, *, run_id: str, job_namespace: str, job_name: str, job_type: str, inputs: Sequence[LineageDataset] = (),
              outputs: Sequence[LineageDataset] = (), error: str | None = None) -> Any:  # fmt: skip
    """An OpenLineage ``RunEvent`` (``START``, ``COMPLETE`` or ``FAIL``) with our datasets and facets."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import error_message_run, job_type_job

    run_facets: dict[str, Any] = {}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(message=error, programmingLanguage="python", producer=PRODUCER)
    job_facets: dict[str, Any] = {"jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="DSV", jobType=job_type, producer=PRODUCER)}
    return RunEvent(
        eventType=RunState[state],
        eventTime=dt.datetime.now(dt.UTC).isoformat(),
        run=Run(runId=run_id, facets=run_facets),
        job=Job(namespace=job_namespace, name=job_name, facets=job_facets),
        inputs=[InputDataset(namespace=d.namespace, name=d.name, facets=_facets(d)) for d in inputs],
        outputs=[OutputDataset(namespace=d.namespace, name=d.name, facets=_facets(d)) for d in outputs],
        producer=PRODUCER,
    )


def new_run_id() -> str:
    """A UUIDv7 run id (the client's generator)."""
    from openlineage.client.uuid import generate_new_uuid

    return str(generate_new_uuid())


class Emitter:
    """The process's OpenLineage client, made (reading its configuration) on first use."""

    def __init__(self) -> None:
        self._client: Any = None
        self._paused_until = 0.0

    def reset(self) -> None:
        """Forget the client and any pause: the next event makes a new client from the configuration then."""
        self._client, self._paused_until = None, 0.0

    def _current(self) -> Any:
        if self._client is None:
            from openlineage.client import OpenLineageClient

            self._client = OpenLineageClient()
        return self._client

    def emit(self, state: str, **event: Any) -> bool:
        """Send one run event (arguments as :func:`run_event`); False, with a warning, when it could not be sent."""
        if time.monotonic() < self._paused_until:
            return False
        try:
            self._current().emit(run_event(state, **event))
        except Exception as exc:  # lineage emission must never fail the pipeline
            self._paused_until = time.monotonic() + PAUSE_SECONDS
            log.warning("OpenLineage: could not emit %s of %s (%s); pausing emission for %.0fs", state, event.get("job_name"), exc, PAUSE_SECONDS)
            return False
        return True


EMITTER = Emitter()

__all__ = ["EMITTER", "Emitter", "LineageDataset", "new_run_id", "run_event"]
