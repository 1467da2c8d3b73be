"""One realization's partitions prepared by several steps (processes, workers), sealed and published by one.

``plan_fanout`` pins the inputs, assembles once for the split assignment, the gates and the partition
list, and opens the candidate; ``prepare_group`` re-assembles from the pinned snapshots (same ids,
watermark and held batches) and hashes and stores only its group's parts into the candidate's staging
attempt; ``seal_fanout`` runs the single-step build's finish (manifest, gates, publish, alias) over
the leaves. Steps pass small values only (pins, keys, leaves); no rows are written but the parts.

Details: docs/scaling-out.md
"""

from __future__ import annotations

import copyreg
import datetime as dt
import functools
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.errors import PublicationError
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.core.publication.manifest import BuiltPart
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.publication.privacy_gates import moved_since
from dsv_platform.services.publication.publisher import BuildRequest
from dsv_platform.services.publication.realization import (
    ALIAS,
    Pin,
    Pinned,
    RealizationBuild,
    build_examples,
    build_publisher,
    build_request,
    pin_build,
    realization_io,
    realization_job,
    reused_build,
    versioned_key,
)
from dsv_platform.services.publication.realization_inputs import inputs_of, logical_key, pinned_watermark

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def _mapping_proxy(items: dict[str, Any]) -> types.MappingProxyType[str, Any]:
    return types.MappingProxyType(items)


# The plan crosses processes pickled (Dagster's IO manager); the manifest's frozen mappings are read-only views of a dict.
copyreg.pickle(types.MappingProxyType, lambda proxy: (_mapping_proxy, (dict(proxy),)))


class FanOutError(PublicationError):
    """The steps of a fanned-out build disagree (inputs changed between them, a partition missing or claimed twice)."""


@dataclass(frozen=True)
class FanOutPlan:
    """What the plan step hands the prepare and seal steps: pins and keys, never rows."""

    pins: tuple[Pin, ...]
    key: str
    held: tuple[str, ...]
    reused: bool
    watermark: dt.datetime | None = None
    keys: tuple[str, ...] = ()
    rows: int = 0
    candidate: int | None = None
    attempt: str | None = None
    manifest_fields: Mapping[str, Any] = field(default_factory=dict)
    gates: tuple[GateResult, ...] = ()

    def groups(self, count: int) -> list[tuple[str, ...]]:
        """The partition keys in at most ``count`` contiguous, non-empty groups of near-equal size, in key order."""
        size, extra = divmod(len(self.keys), max(1, count))
        bounds, start = [], 0
        for i in range(max(1, count)):
            end = start + size + (1 if i < extra else 0)
            bounds.append(self.keys[start:end])
            start = end
        return [g for g in bounds if g]

    def pinned(self, platform: Platform, definition: DatasetDefinition) -> Pinned:
        return Pinned(inputs_of(platform.config, definition), self.pins, self.key, self.held)


def plan_fanout(platform: Platform, definition: DatasetDefinition, *, progress: Progress = SILENT) -> FanOutPlan:
    """Pin, assemble, split and gate as the single-step build does; open the candidate (nothing to do when already published)."""
    pinned = pin_build(platform, definition, progress=progress)
    publisher = build_publisher(platform, progress)
    if reused_build(publisher, pinned) is not None:  # the same inputs published: the seal step reports it
        progress.done()
        return FanOutPlan(pinned.pins, pinned.key, pinned.held, True)
    watermark = pinned_watermark(platform.tables, pinned.inputs, {p.table: p for p in pinned.pins})
    with build_examples(platform, pinned, watermark, progress) as (examples, population):
        request, gates = build_request(platform, pinned, examples, population, watermark, progress=progress)
        keys = tuple(k for k, _ in request.partitions)
        candidate, attempt = publisher.begin(request)
        rows = examples.num_rows
    progress.done()
    return FanOutPlan(pinned.pins, pinned.key, pinned.held, False, watermark, keys, rows, candidate, attempt, request.manifest_fields, tuple(gates))


def _check_unchanged(platform: Platform, definition: DatasetDefinition, plan: FanOutPlan) -> None:
    """Fail closed when a privacy deletion or a raw-batch quarantine since the plan changed what the pins mean."""
    key, _ = versioned_key(platform, definition, logical_key(definition, {p.table: p.snapshot_id for p in plan.pins}))
    if key != plan.key:
        raise FanOutError(f"{definition.ref}: the build's inputs changed since its plan (logical key {plan.key} is now {key}); build again")


def prepare_group(
    platform: Platform, definition: DatasetDefinition, plan: FanOutPlan, keys: Sequence[str], *, progress: Progress = SILENT
) -> list[BuiltPart]:
    """Re-assemble the pinned inputs and hash and store the parts of ``keys`` into the plan's staging attempt; their leaves."""
    if plan.reused or plan.attempt is None or plan.watermark is None:
        raise FanOutError(f"{definition.ref}: nothing to prepare, the plan opened no candidate")
    _check_unchanged(platform, definition, plan)
    publisher = build_publisher(platform, progress)
    with build_examples(platform, plan.pinned(platform, definition), plan.watermark, progress) as (examples, _):
        parts = dict(examples.parts())
        if sorted(parts) != sorted(plan.keys):
            raise FanOutError(f"{definition.ref}: re-assembly gave partitions {sorted(parts)[:5]}..., the plan {list(plan.keys)[:5]}...")
        progress.stage("parts", total=len(keys), unit="partitions")
        leaves = publisher.write_parts(plan.attempt, [(k, parts[k]) for k in keys], definition.contract)
    progress.done()
    return leaves


def _partition_rows(platform: Platform, definition: DatasetDefinition, plan: FanOutPlan, key: str) -> pa.Table:
    """One partition's rows re-assembled (what the publisher re-puts when GC deleted a part before publication)."""
    assert plan.watermark is not None
    with build_examples(platform, plan.pinned(platform, definition), plan.watermark) as (examples, _):
        return dict(examples.parts())[key]()


def _leaves_in_order(definition: DatasetDefinition, plan: FanOutPlan, groups: Sequence[Sequence[BuiltPart]]) -> list[BuiltPart]:
    leaves = [part for group in groups for part in group]
    by_key = {part.key: part for part in leaves}
    if len(by_key) != len(leaves) or set(by_key) != set(plan.keys):
        missing, extra = sorted(set(plan.keys) - set(by_key)), sorted(set(by_key) - set(plan.keys))
        raise FanOutError(f"{definition.ref}: the prepare steps' parts do not cover the plan (missing {missing[:5]}, extra {extra[:5]}, or a duplicate)")
    if sum(part.rows for part in leaves) != plan.rows:
        raise FanOutError(f"{definition.ref}: the parts hold {sum(p.rows for p in leaves)} rows, the plan {plan.rows}")
    return [by_key[k] for k in plan.keys]


@openlineage.emits(realization_job, realization_io)
def seal_fanout(
    platform: Platform, definition: DatasetDefinition, plan: FanOutPlan, groups: Sequence[Sequence[BuiltPart]], *, progress: Progress = SILENT
) -> RealizationBuild:
    """Seal the plan's candidate with every group's leaves, gate, publish and move the alias (the single-step build's finish)."""
    publisher = build_publisher(platform, progress)
    if plan.reused:
        done = reused_build(publisher, plan.pinned(platform, definition))
        if done is None:
            raise FanOutError(f"{definition.ref}: the plan found request {plan.key} published, it is not any more")
        return done
    assert plan.candidate is not None and plan.attempt is not None
    try:
        parts = _leaves_in_order(definition, plan, groups)
    except FanOutError as exc:  # fail closed: the candidate cannot become this realization
        platform.registry.transition(plan.candidate, RealizationState.FAILED, reason=str(exc), actor=platform.actor)
        platform.store.abandon(plan.attempt)
        raise
    gates = tuple(moved_since(platform, plan.gates))  # a deletion request since the plan: its rows are not at hand, blocked (fail closed)
    request = BuildRequest(
        dataset=definition.name, version=definition.version, contract=definition.contract, request_id=plan.pinned(platform, definition).request_id,
        logical_key=plan.key, partitions=[(k, functools.partial(_partition_rows, platform, definition, plan, k)) for k in plan.keys],
        manifest_fields=plan.manifest_fields, gates=lambda manifest, rows: gates, alias=ALIAS,
    )  # fmt: skip
    result = publisher.finish(plan.candidate, plan.attempt, request, parts)
    progress.done()
    return RealizationBuild(result.ref, result.manifest, plan.pins, False, gates)


__all__ = ["FanOutError", "FanOutPlan", "plan_fanout", "prepare_group", "seal_fanout"]
