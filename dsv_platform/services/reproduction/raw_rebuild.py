"""Rebuilding one realization's examples from raw landing, up to its recorded watermark, in a scratch catalog.

The audit's last resort when an input no longer hashes (or was collected). Nothing is
published; the caller compares the rebuilt content and split-assignment hashes with the manifest.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.adapters.iceberg.iceberg import CanonicalTables
from dsv_platform.adapters.objects.landing import LandingZone
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.core.config.dataset_definition import DatasetDefinition, parse_definition
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.errors import DsvError, ObjectNotFoundError, ObjectVerificationError
from dsv_platform.core.identity.example_id import assignment_key, with_example_id
from dsv_platform.core.identity.hashing import digest_of, hash_partition
from dsv_platform.core.ingest.batch import prepare_batch
from dsv_platform.core.publication.manifest import Manifest
from dsv_platform.core.splits.policy import assign_examples
from dsv_platform.core.splits.split_checks import assignment_hash
from dsv_platform.services.ingest.canonical_load import rows_of_day
from dsv_platform.services.ingest.label_build import build_label_table
from dsv_platform.services.publication.assembly_engine import engine_limits
from dsv_platform.services.publication.parts import sorted_for_storage
from dsv_platform.services.publication.realization_inputs import Inputs, Pin, RealizationBuildError, assemble, example_id, inputs_of, partitions_of

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
    document = {**json.loads(found.recipe_json), "contract": json.loads(found.contract_json)}
    definition = parse_definition(document, source=f"registry {manifest.dataset}:{manifest.version}")
    recorded = dict(manifest.parameters).get("recipe_hash")
    if recorded != definition.recipe_hash:
        raise TransformChangedError(f"{manifest.dataset}:{manifest.version}: manifest records recipe {recorded}, the registry holds {definition.recipe_hash}")
    return definition


def with_joins(definition: DatasetDefinition, config: PlatformConfig) -> DatasetDefinition:
    """A legacy recipe (``sources: [...]``) with the base and joins of the configured definition of the same ref."""
    if not definition.legacy_sources:
        return definition
    for d in config.datasets:
        if (d.name, d.version) == (definition.name, definition.version) and d.sources == definition.sources:
            return replace(definition, base=d.base, as_of_joins=d.as_of_joins)
    raise TransformChangedError(f"{definition.ref}: a legacy recipe over {list(definition.sources)} and no configured definition says how to join them")


def _replay(zone: LandingZone, tables: CanonicalTables, specs: list[SourceSpec], watermark: dt.datetime) -> int:
    applied = 0
    for spec in specs:
        for day in sorted({r.day for r in zone.records(spec.name)}):
            for record in zone.loadable(spec.name, day):
                if record.recorded_at > watermark:
                    continue
                try:
                    data = zone.read(record)
                except (ObjectNotFoundError, ObjectVerificationError) as exc:
                    raise RawMissingError(f"raw batch {record.batch_ref} of {spec.name} {day} is gone or damaged: {exc}") from exc
                rows = rows_of_day(prepare_batch(data, spec, replay=True).accepted, spec, day)  # landed under its contract then
                tables.append(spec, rows, recorded_at=record.recorded_at, batch=record.batch_ref)
                applied += 1
    return applied


def _scratch_pins(scratch: CanonicalTables, inputs: Inputs, watermark: dt.datetime) -> dict[str, Pin]:
    pins = {}
    for spec in inputs.tables:
        sid = scratch.current_snapshot_id(spec)
        if sid is None:
            raise RawMissingError(f"no raw batch of {spec.name} was recorded by the watermark {watermark.isoformat()}")
        pins[spec.name] = Pin(spec.name, sid, "")
    return pins


def _replayed_sources(platform: Platform, inputs: Inputs) -> list[SourceSpec]:
    """The definition's sources and its label's input sources, each once."""
    names = [*inputs.definition.sources, *(inputs.label.inputs if inputs.label is not None else ())]
    unknown = [n for n in names if n not in platform.config.sources]
    if unknown:
        raise TransformChangedError(f"{inputs.definition.ref}: source(s) {unknown} are not configured")
    return [platform.config.sources[n] for n in dict.fromkeys(names)]


def rebuild_from_raw(platform: Platform, manifest: Manifest, *, workdir: Path) -> RebuiltInput:
    """Rebuild ``manifest``'s examples and split assignment from raw landing (see the module docstring)."""
    definition = with_joins(registered_definition(platform.registry, manifest), platform.config)
    if manifest.watermark is None:
        raise TransformChangedError(f"{manifest.dataset}:{manifest.version}: the manifest records no watermark to rebuild up to")
    watermark = dt.datetime.fromisoformat(manifest.watermark)
    try:
        inputs = inputs_of(platform.config, definition)
    except RealizationBuildError as exc:
        raise TransformChangedError(str(exc)) from exc
    scratch_space = platform.scratch(workdir)
    zone, scratch = scratch_space.landing, scratch_space.tables
    specs = _replayed_sources(platform, inputs)
    if not any(zone.records(s.name) for s in specs):
        raise RawMissingError(f"no raw batches of {[s.name for s in specs]} are landed in {platform.home}; nothing to rebuild from")
    batches = _replay(zone, scratch, specs, watermark)
    if inputs.label is not None:
        build_label_table(scratch, inputs.label, [platform.config.sources[n] for n in inputs.label.inputs], as_of=watermark)
    examples, _ = assemble(scratch, inputs, _scratch_pins(scratch, inputs, watermark), watermark, limits=engine_limits(platform))
    contract = definition.contract
    parts, leaves = [], []
    for key, rows in partitions_of(examples, contract):
        rows = sorted_for_storage(rows, contract)
        leaves.append(hash_partition(rows, contract, key=key))
        parts.append(rows)
    table = pa.concat_tables(parts) if parts else contract.arrow_schema.empty_table()
    content = digest_of(leaves, contract).content_hash
    if definition.split_policy is None:  # a dataset without splits (e.g. readings_hourly): no assignment to rebuild
        return RebuiltInput(content, "", table, table.select([]), batches)
    ident = example_id(contract)
    ided = with_example_id(examples, contract, source=definition.ref)
    _, assignment = assign_examples(ided, definition.policy(), ident, definition.entity_column, assignment_key(contract))
    return RebuiltInput(content, assignment_hash(assignment, ident), table, assignment, batches)


def split_of(rebuilt: RebuiltInput, split: str, key: tuple[str, ...]) -> pa.Table:
    """The rebuilt rows of one split, as :meth:`Dataset.to_arrow` returns them."""
    ids = [c for c in rebuilt.assignment.column_names if c not in ("split", "bucket") and c in rebuilt.examples.column_names]
    chosen = rebuilt.assignment.filter(pc.equal(rebuilt.assignment.column("split"), split)).select(ids)
    return rebuilt.examples.join(chosen, keys=ids, join_type="inner").sort_by([(k, "ascending") for k in key])
