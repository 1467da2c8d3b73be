"""Rebuilding one realization's examples from raw landing, up to its recorded watermark, in a scratch catalog.

The audit's last resort when an input no longer hashes (or was collected):
replay every loadable landed batch recorded at or before the watermark into
fresh canonical tables under ``workdir``, rebuild the pinned label version as
of the watermark, and assemble the examples with the definition registered
for the manifest's dataset version (the recorded transform version: its recipe
hash must equal the one in the manifest's parameters). Nothing is published;
the caller compares the rebuilt content and split-assignment hashes with the
manifest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg import CanonicalTables
from dsv_platform.services.canonical_load import build_labels, label_spec
from dsv_platform.adapters.landing import LandingZone
from dsv_platform.services.publisher import sorted_for_storage
from dsv_platform.services.realization import Pin, assemble
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.dataset_definition import DatasetDefinition, parse_definition
from dsv_platform.core.errors import DsvError, ObjectNotFoundError, ObjectVerificationError
from dsv_platform.core.hashing import digest_of, hash_partition
from dsv_platform.core.manifest import Manifest
from dsv_platform.core.split_checks import assignment_hash
from dsv_platform.core.splits import assign
from dsv_platform.domain.batch import prepare_batch
from dsv_platform.domain.labels import label_definition
from dsv_platform.domain.sources import CHARGEBACKS, SOURCES, TRANSACTIONS

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


class RawMissingError(DsvError):
    """The raw batches a rebuild needs are gone (collected) or no longer hash to their names."""


class TransformChangedError(DsvError):
    """The registered definition is not the transform version the manifest records."""


@dataclass(frozen=True)
class RebuiltInput:
    content_hash: str
    assignment_hash: str
    examples: pa.Table  # contract columns, partitions in storage order
    assignment: pa.Table
    batches: int


def registered_definition(registry: Registry, manifest: Manifest) -> DatasetDefinition:
    """The definition registered for the manifest's dataset version, checked against the recorded recipe hash."""
    found = registry.get_definition(manifest.dataset, manifest.version)
    if found is None:
        raise TransformChangedError(f"no registered definition {manifest.dataset}:{manifest.version}")
    definition = parse_definition({**json.loads(found.recipe_json), "contract": json.loads(found.contract_json)}, source=f"registry {manifest.dataset}:{manifest.version}")
    recorded = dict(manifest.parameters).get("recipe_hash")
    if recorded != definition.recipe_hash:
        raise TransformChangedError(f"{manifest.dataset}:{manifest.version}: manifest records recipe {recorded}, the registry holds {definition.recipe_hash}")
    return definition


def _replay(zone: LandingZone, tables: CanonicalTables, names: list[str], watermark: dt.datetime) -> int:
    applied = 0
    for name in names:
        spec = SOURCES[name]
        for day in sorted({r.day for r in zone.records(name)}):
            for record in zone.loadable(name, day):
                if record.recorded_at > watermark:
                    continue
                try:
                    data = zone.read(record)
                except (ObjectNotFoundError, ObjectVerificationError) as exc:
                    raise RawMissingError(f"raw batch {record.batch_ref} of {name} {day} is gone or damaged: {exc}") from exc
                prepared = prepare_batch(data, spec.contract, spec.aliases)
                tables.append(spec, prepared.accepted, recorded_at=record.recorded_at, batch=record.batch_ref)
                applied += 1
    return applied


def rebuild_from_raw(platform: Platform, manifest: Manifest, *, workdir: Path) -> RebuiltInput:
    """Rebuild ``manifest``'s examples and split assignment from raw landing (see the module docstring)."""
    definition = registered_definition(platform.registry, manifest)
    if manifest.watermark is None:
        raise TransformChangedError(f"{manifest.dataset}:{manifest.version}: the manifest records no watermark to rebuild up to")
    watermark = dt.datetime.fromisoformat(manifest.watermark)
    scratch_space = platform.scratch(workdir)
    zone = scratch_space.landing
    names = sorted({*definition.sources, TRANSACTIONS.name, CHARGEBACKS.name} & set(SOURCES))
    if not any(zone.records(n) for n in names):
        raise RawMissingError(f"no raw batches of {names} are landed in {platform.home}; nothing to rebuild from")
    scratch = scratch_space.tables
    batches = _replay(zone, scratch, names, watermark)
    label = label_definition(definition.label_version)
    build_labels(scratch, label, as_of=watermark)
    specs = [SOURCES[s] for s in definition.sources] + [label_spec(label)]
    pins = {}
    for spec in specs:
        sid = scratch.current_snapshot_id(spec)
        if sid is None:
            raise RawMissingError(f"no raw batch of {spec.name} was recorded by the watermark {watermark.isoformat()}")
        pins[spec.name] = Pin(spec.name, sid, "")
    examples, _ = assemble(scratch, definition, pins, watermark)
    contract = definition.contract
    column = contract.partition_by or "event_date"
    parts, leaves = [], []
    for day in sorted(pc.unique(examples.column(column)).to_pylist()):
        key = f"{column}={day.isoformat()}"
        rows = sorted_for_storage(examples.filter(pc.equal(examples.column(column), pa.scalar(day, pa.date32()))), contract)
        leaves.append(hash_partition(rows, contract, key=key))
        parts.append(rows)
    table = pa.concat_tables(parts) if parts else contract.arrow_schema.empty_table()
    assignment = assign(examples.select(["transaction_id", definition.entity_column]), definition.policy()).sort_by("transaction_id")
    return RebuiltInput(digest_of(leaves, contract).content_hash, assignment_hash(assignment, "transaction_id"), table, assignment, batches)


def split_of(rebuilt: RebuiltInput, split: str, key: tuple[str, ...]) -> pa.Table:
    """The rebuilt rows of one split, as :meth:`Dataset.to_arrow` returns them."""
    ids = [c for c in rebuilt.assignment.column_names if c not in ("split", "bucket")]
    chosen = rebuilt.assignment.filter(pc.equal(rebuilt.assignment.column("split"), split)).select(ids)
    return rebuilt.examples.join(chosen, keys=ids, join_type="inner").sort_by([(k, "ascending") for k in key])
