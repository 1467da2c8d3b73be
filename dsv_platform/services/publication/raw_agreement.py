"""The ``integrity:raw_agreement`` signal at build: every batch of the pinned source snapshots against its landed raw batch.

The landing is written once and content-addressed; each canonical row names its batch (``_batch``). Per source the
definition reads and per batch its pinned snapshot holds, the canonical rows of that batch (only its files are read)
are compared with the batch's accepted rows derived again from the raw bytes (streamed a record batch at a time, as
the load reads them): core/identity/raw_agreement.py. Memory follows one batch, never the table. Corrections are
new rows of a new batch, compared with their own batch. Batches an operator holds (quarantine) are not read by the
build and not compared. Details: docs/quarantine.md ("raw_agreement").
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, BinaryIO

import pyarrow as pa

from dsv_platform.adapters.iceberg.iceberg_stream import batch_tables
from dsv_platform.adapters.objects.landing import LandingRecord
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.contracts import integrity_signals as sig
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectVerificationError
from dsv_platform.core.identity.raw_agreement import BatchAgreement, compare_batch
from dsv_platform.core.ingest.batch_stream import plan_batch, validated_chunks
from dsv_platform.core.ingest.landing_stream import UnreadableBatch
from dsv_platform.core.ingest.scan_memo import recall
from dsv_platform.core.publication.gates import GateResult

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform
    from dsv_platform.services.publication.realization_inputs import Pin


def _raw_rows(platform: Platform, spec: SourceSpec, record: LandingRecord) -> Iterator[pa.Table]:
    """The accepted rows of a landed batch, a record batch at a time (UnreadableBatch, Object*Error propagate)."""

    def opener() -> BinaryIO:
        return platform.landing.open(record)

    known = recall(record.digest, spec)
    plan = known.plan if known is not None and known.plan is not None else plan_batch(opener, spec)
    for accepted, _rejected, _failures in validated_chunks(opener, spec, plan):
        yield accepted


def compare_source(platform: Platform, spec: SourceSpec, snapshot_id: int, *, held: Collection[str] = ()) -> list[BatchAgreement]:
    """:func:`compare_batch` of every batch (but ``held``) whose rows the snapshot ``snapshot_id`` of ``spec`` holds."""
    tbl = platform.tables.table(spec)
    records: dict[str, LandingRecord] = {}
    for r in platform.landing.records(spec.name):
        records.setdefault(r.batch_ref, r)
    out = []
    for batch, canonical in batch_tables(tbl, spec.contract, snapshot_id):
        if batch in held:
            continue
        record, n = records.get(batch), canonical.num_rows
        if record is None:
            out.append(BatchAgreement(spec.name, batch, n, problem="no raw batch of this source landed under this ref"))
        elif record.redacted:
            out.append(BatchAgreement(spec.name, batch, n, unverified="its raw object was erased by a privacy deletion"))
        elif not record.loadable:
            out.append(BatchAgreement(spec.name, batch, n, problem=f"its raw batch is {record.status.value}, never loadable"))
        else:
            try:
                out.append(compare_batch(spec.name, batch, spec.contract, canonical, _raw_rows(platform, spec, record)))
            except ObjectErasedError:
                out.append(BatchAgreement(spec.name, batch, n, unverified="its raw object was erased by a privacy deletion"))
            except (ObjectNotFoundError, ObjectVerificationError) as exc:
                out.append(BatchAgreement(spec.name, batch, n, problem=f"its raw object cannot be read as landed ({exc})"))
            except UnreadableBatch as exc:  # e.g. a contract changed since in a way the old bytes do not read under
                out.append(BatchAgreement(spec.name, batch, n, unverified=f"its raw batch does not read under the current contract ({exc})"))
    return out


def raw_agreement_gate(platform: Platform, definition: DatasetDefinition, pins: Mapping[str, Pin], *, held: Collection[str] = ()) -> GateResult:
    """The ``integrity:raw_agreement`` gate of a build of ``definition`` over its pinned sources (``pins``: table -> pin)."""
    policy = sig.parse_integrity(definition.document.get("integrity"), file=str(definition.contract.source or definition.ref))
    started, results = time.monotonic(), list[BatchAgreement]()
    if policy.raw_agreement:
        for name in definition.sources:
            spec = platform.config.sources.get(name)
            if spec is not None and name in pins:
                results += compare_source(platform, spec, pins[name].snapshot_id, held=held)
    disagreeing = [r for r in results if not r.agrees]
    columns = {f"{r.source}.{c}" for r in disagreeing for c in r.columns}
    unverified = [f"{r.source}:{r.batch}: {r.unverified}" for r in results if r.unverified is not None]
    rows = sum(r.canonical_rows for r in results)
    return sig.raw_agreement(policy, len(results), rows, [r.describe() for r in disagreeing], columns, unverified, time.monotonic() - started)


__all__ = ["compare_source", "raw_agreement_gate"]
