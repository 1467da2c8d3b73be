"""Building a dataset realization from a declarative definition.

Pin every input snapshot, assemble the examples point in time, split, and publish through
:class:`Publisher` with the gates. Rebuilding over unchanged snapshots reuses the published
realization (the request id is the logical key), so the same inputs give one realization.

Details: docs/lineage-and-reproduction.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.lineage.openlineage import LineageDataset
from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.core import canonical_json
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.dataset_record import feature_versions
from dsv_platform.core.config.expected_partitions import expected_partitions_gates
from dsv_platform.core.config.source import TableSpecLike
from dsv_platform.core.config.timezones import tz_database
from dsv_platform.core.contracts.semantic_rules import declared_rules
from dsv_platform.core.contracts.validation import validate
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.publication.gates import GateResult, rows_at_least
from dsv_platform.core.publication.manifest import CodePin, EnvironmentPin, LabelPin, Manifest, SourcePin, SplitsEntry
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.splits.split_checks import proportions_of_counts
from dsv_platform.services.ingest.canonical_load import held_batches
from dsv_platform.services.ingest.label_build import label_table_spec
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.privacy.privacy import PrivacyCoordinator
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform.services.publication.assembly_engine import engine_limits
from dsv_platform.services.publication.card import publication_card
from dsv_platform.services.publication.datasets import load_manifest
from dsv_platform.services.publication.examples import Examples
from dsv_platform.services.publication.integrity_signals import integrity_gates
from dsv_platform.services.publication.privacy_gates import access_key, privacy_gates, recheck
from dsv_platform.services.publication.publisher import BuildRequest, BuildStep, Publisher
from dsv_platform.services.publication.realization_inputs import (
    REPO,
    Inputs,
    Pin,
    RealizationBuildError,
    assembled,
    code_pin,
    environment_lockfile,
    environment_pin,
    example_id,
    inputs_of,
    logical_key,
    pin_sources,
    pinned_watermark,
    runner_timezone,
)
from dsv_platform.services.publication.record import hold_retention
from dsv_platform.services.publication.semantic_gate import semantic_gates
from dsv_platform.services.publication.split_assignment import SplitSummary, split_assignment
from dsv_platform.services.publication.splits_check import SplitsCheck, check_splits
from dsv_platform.services.trust.data_files import check_pinned_files
from dsv_platform.services.trust.signing import signer_of
from dsv_platform.services.trust.trust import gatekeeper

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

ALIAS = "candidate"


@dataclass(frozen=True)
class RealizationBuild:
    """What a build produced (or found already published for the same inputs)."""

    ref: str
    manifest: Manifest
    pins: tuple[Pin, ...]
    reused: bool
    gates: tuple[GateResult, ...]

    @property
    def manifest_hash(self) -> str:
        return self.manifest.manifest_hash

    @property
    def content_hash(self) -> str:
        return self.manifest.content_hash

    @property
    def split_counts(self) -> dict[str, int]:
        return dict(self.manifest.splits.counts) if self.manifest.splits else {}


def _gates(definition: DatasetDefinition, assignment: SplitSummary | None, rows: int, population: int) -> list[GateResult]:
    """Entity disjointness, the proportions (when the policy fixes them), the row count, the policy's own rules, label coverage."""
    if assignment is None:  # no splits: the row count (and label coverage) gate the examples themselves
        return [rows_at_least(rows, definition.gates.rows_at_least), *_coverage(definition, rows, population)]
    policy = definition.policy()
    disjoint = assignment.disjoint
    gates = [GateResult("splits_are_entity_disjoint", disjoint.passed, {f.name: str(dict(f.detail)) for f in disjoint.findings})]
    parts = policy.expected_parts()
    if parts is not None:
        proportions = proportions_of_counts(assignment.counts, assignment.rows, parts, definition.gates.proportion_tolerance_bp)
        observed = {f.name: str(f.detail.get("observed")) for f in proportions.findings}
        gates.append(GateResult("proportions_within_tolerance", proportions.passed, observed, blocking=False))
    gates.append(rows_at_least(assignment.rows, definition.gates.rows_at_least))
    for check in assignment.checks:
        gates.append(GateResult(check.name, check.report.passed, {f.name: str(dict(f.detail)) for f in check.report.findings}, blocking=check.blocking))
    return gates + _coverage(definition, rows, population)


def _coverage(definition: DatasetDefinition, rows: int, population: int) -> list[GateResult]:
    if definition.label is None:
        return []
    coverage_bp = rows * 10_000 // population if population else 0
    minimum = definition.gates.label_coverage_at_least_bp
    return [GateResult("label_coverage", coverage_bp >= minimum, {"coverage_bp": coverage_bp, "minimum_bp": minimum, "population": population})]


# ---------------------------------------------------------------- the build


def _manifest_fields(
    platform: Platform,
    inputs: Inputs,
    pins: tuple[Pin, ...],
    splits: SplitsEntry | None,
    watermark: dt.datetime,
    population: int,
    *,
    code: CodePin | None,
    environment: EnvironmentPin | None,
    held: tuple[str, ...] = (),
) -> dict[str, object]:
    """What the manifest records besides the partitions: pins, label, window, watermark, code, environment, parameters."""
    definition = inputs.definition
    by_name = {spec.name: spec for spec in inputs.tables}
    parameters: dict[str, object] = {"recipe_hash": definition.recipe_hash, "watermark_rule": definition.watermark.rule, "population_rows": population}
    if definition.zones:  # which tz rules the recipe's local times used, as canonical JSON (docs/configuration.md)
        parameters["tz_database"] = canonical_json.dumps(tz_database(definition.zones)).decode()
    if held:  # the quarantined raw batches whose rows this realization did not read
        parameters["excluded_batches"] = canonical_json.dumps(list(held)).decode()
    return {
        "splits": splits,
        "sources": tuple(SourcePin(p.table, str(p.snapshot_id), p.tag, {"identifier": platform.tables.identifier(by_name[p.table])}) for p in pins),
        "labels": LabelPin(definition.label.name, f"v{definition.label.version}") if definition.label is not None else None,
        "feature_versions": feature_versions(inputs.sources[name] for name in definition.sources),  # sources declaring `version`
        "observation_window": definition.observation_window.to_document(),
        "population_filter": definition.population_filter.to_text() if definition.population_filter is not None else None,
        "watermark": watermark.astimezone(dt.UTC).isoformat(),
        "code": code or code_pin(),
        "environment": environment or environment_pin(),
        "runner_timezone": runner_timezone(),
        "parameters": parameters,
        "seed": definition.seed,
    }


# ---------------------------------------------------------------- lineage descriptors (services/lineage/openlineage.py emits them)


def realization_dataset(platform: Platform, build: RealizationBuild) -> LineageDataset:
    """``realization:<manifest hash>`` as ``<dataset>:<version>`` at version ``<manifest hash>``."""
    m = build.manifest
    pins = [{"table": p.table, "snapshot_id": p.snapshot_id, "tag": p.tag} for p in build.pins]
    facet = {"node": f"realization:{m.manifest_hash}", "kind": "realization", "ref": build.ref, "manifest_hash": m.manifest_hash,
             "content_hash": m.content_hash, "rows": m.rows, "pinned_snapshots": pins, "reused": build.reused}  # fmt: skip
    if m.labels:
        facet["label_version"] = f"{m.labels.name}@{m.labels.version}"
    schema = [(str(c["name"]), str(c["type"])) for c in (m.to_document().get("contract") or {}).get("columns", [])]
    return LineageDataset(openlineage.namespace(platform), f"{m.dataset}:{m.version}", m.manifest_hash, schema, facet)


def realization_job(platform: Platform, definition: DatasetDefinition, **_: Any) -> tuple[str, str]:
    return f"dataset_build.{definition.name}.{definition.version}", "DATASET_BUILD"


def realization_io(build: RealizationBuild, platform: Platform, definition: DatasetDefinition, **_: Any) -> openlineage.IO:
    """Inputs: every pinned snapshot (with its tag); output: the realization."""
    specs = {**platform.config.sources, **{s.name: s for s in _label_specs(platform)}}
    inputs = [openlineage.snapshot(platform, specs[p.table], p.snapshot_id, tag=p.tag) for p in build.pins if p.table in specs]
    return inputs, [realization_dataset(platform, build)]


def _label_specs(platform: Platform) -> list[TableSpecLike]:
    return [label_table_spec(v) for versions in platform.config.labels.values() for v in versions.values()]


@openlineage.emits(realization_job, realization_io)
def build_realization(
    platform: Platform,
    definition: DatasetDefinition,
    *,
    code: CodePin | None = None,
    environment: EnvironmentPin | None = None,
    progress: Progress = SILENT,
) -> RealizationBuild:
    """Pin, read, assemble, split and publish one realization of ``definition`` (idempotent per pinned inputs).

    ``code`` and ``environment`` default to the live checkout and interpreter; the
    current environment's lockfile is stored as an object named by its hash.
    ``progress`` hears the stages: pin, read inputs, assemble, split, gates, parts, publish, alias.
    """
    pinned = pin_build(platform, definition, stores_environment=environment is None, progress=progress)
    publisher = build_publisher(platform, progress)
    done = reused_build(publisher, pinned)
    if done is not None:
        progress.done()
        return done
    watermark = pinned_watermark(platform.tables, pinned.inputs, {p.table: p for p in pinned.pins})
    with build_examples(platform, pinned, watermark, progress) as (examples, population):
        request, gates = build_request(platform, pinned, examples, population, watermark, code=code, environment=environment, progress=progress)
        progress.stage("parts", total=len(request.partitions), unit="partitions")
        result = publisher.build(request)  # it records the pinned_by / part_of edges the manifest implies (once, deduplicated)
    progress.done()
    return RealizationBuild(result.ref, result.manifest, pinned.pins, False, tuple(gates))


@dataclass(frozen=True)
class Pinned:
    """A build's pinned inputs: the pins, the logical key (with redaction generation and held batches), the request id."""

    inputs: Inputs
    pins: tuple[Pin, ...]
    key: str
    held: tuple[str, ...]
    generation: int = 0  # the redaction generation when the inputs were pinned (the privacy gate counts requests after it)

    @property
    def request_id(self) -> str:
        return f"{self.inputs.definition.name}:{self.inputs.definition.version}:{self.key}"


def pin_build(platform: Platform, definition: DatasetDefinition, *, stores_environment: bool = True, progress: Progress = SILENT) -> Pinned:
    """Register the definition, tag the current snapshot of every input (stage ``pin``) and derive the logical key."""
    if stores_environment:
        platform.store.put(environment_lockfile())
    inputs = inputs_of(platform.config, definition)
    contract_doc = definition.contract.to_document()
    platform.registry.register_definition(definition.name, definition.version, contract=contract_doc, recipe=definition.recipe(), owner=definition.owner)
    hold_retention(platform, definition)
    progress.stage("pin", total=len(inputs.tables), unit="tables")
    generation = platform.registry.redaction_generation()
    key, pins = pin_sources(platform.tables, inputs)
    progress.advance(len(pins))
    key, held = versioned_key(platform, definition, key)
    return Pinned(inputs, pins, key, held, generation)


def build_publisher(platform: Platform, progress: Progress = SILENT) -> Publisher:
    """The publisher of a build: roles checked, signed; ``DSV_BUILD_JOBS`` partitions prepared at once (unset: one per core)."""
    return Publisher(
        platform.registry, platform.store, actor=platform.actor, signer=signer_of(platform), gate=gatekeeper(platform),
        jobs=platform.settings.build_jobs, on_step=publication_steps(progress),
    )  # fmt: skip


def reused_build(publisher: Publisher, pinned: Pinned) -> RealizationBuild | None:
    """The realization the request id already published (its alias move completed), or None."""
    done = publisher.reconcile(pinned.request_id)
    if done is None:
        return None
    _complete_alias_move(publisher, done)  # a build killed between its publication and the alias move
    return RealizationBuild(done.ref, load_manifest(publisher.registry, done), pinned.pins, True, ())


@contextmanager
def build_examples(platform: Platform, pinned: Pinned, watermark: dt.datetime, progress: Progress = SILENT) -> Iterator[tuple[Examples, int]]:
    """The examples of the pinned inputs as known at ``watermark`` (deleted subjects excluded) and the population, for the block."""
    registry, store, inputs = platform.registry, platform.store, pinned.inputs
    check_pinned_files(platform, inputs.tables, {p.table: p.snapshot_id for p in pinned.pins})  # a data file changed underneath: CORRUPT (docs/trust.md)
    with assembled(
        platform.tables, inputs, {p.table: p for p in pinned.pins}, watermark, exclude_batches=pinned.held, limits=engine_limits(platform), progress=progress
    ) as (examples, population):
        if isinstance(store, EncryptingObjectStore) and registry.privacy.deleted_subjects():  # new realizations exclude deleted subjects
            subject_key = load_subject_key(platform.settings.subject_key_path)
            coordinator = PrivacyCoordinator(registry, store, actor=platform.actor, config=platform.config, subject_key=subject_key)
            examples = examples.filtered(coordinator.exclusion_filter(realization_subjects(platform, inputs.definition)))
        yield examples, population


def build_request(
    platform: Platform,
    pinned: Pinned,
    examples: Examples,
    population: int,
    watermark: dt.datetime,
    *,
    code: CodePin | None = None,
    environment: EnvironmentPin | None = None,
    progress: Progress = SILENT,
) -> tuple[BuildRequest, list[GateResult]]:
    """The split assignment and gates of ``examples`` (stages ``split``, ``gates``) and the publisher's request for them."""
    definition, inputs, pins = pinned.inputs.definition, pinned.inputs, pinned.pins
    splits, gates = _split_and_gates(platform, definition, examples, population, pins, progress)
    gates += privacy_gates(platform, definition, examples, pinned.generation)  # always on: docs/gc-and-privacy.md
    fields = _manifest_fields(platform, inputs, pins, splits, watermark, population, code=code, environment=environment, held=pinned.held)
    request = BuildRequest(
        dataset=definition.name, version=definition.version, contract=definition.contract, request_id=pinned.request_id, logical_key=pinned.key,
        partitions=examples.parts(), manifest_fields=fields, gates=lambda manifest, parts: recheck(platform, definition, examples, gates), alias=ALIAS,
        card=lambda manifest, report: publication_card(platform, manifest, report),
    )  # fmt: skip
    return request, gates


def versioned_key(platform: Platform, definition: DatasetDefinition, key: str) -> tuple[str, tuple[str, ...]]:
    """The pins' ``key`` with the redaction generation and the held raw batches (each makes a rebuild a new logical version)."""
    # A privacy deletion raises the redaction generation; a rebuild after it is a new logical version.
    generation = platform.registry.redaction_generation()
    key = f"{key}:g{generation}" if generation else key
    access = access_key(platform, definition)  # restricted output columns: covering one in the access block is a new logical version
    key = f"{key}:a{access}" if access else key
    # An operator's raw-batch quarantine: a rebuild reads none of its rows, and is a new logical version (docs/quarantine.md).
    held = held_batches(platform, definition.sources)
    return (f"{key}:q{canonical_json.sha256_hex(list(held))[:12]}" if held else key), held


def _split_and_gates(
    platform: Platform, definition: DatasetDefinition, examples: Examples, population: int, pins: tuple[Pin, ...], progress: Progress
) -> tuple[SplitsEntry | None, list[GateResult]]:
    """The split assignment (stage ``split``, when the definition has a policy) and every gate's result (stage ``gates``)."""
    assignment, splits = None, None
    if definition.split_policy is not None:
        progress.stage("split")
        assignment, splits = split_assignment(platform, definition, examples, progress)
    progress.stage("gates", unit="gates")
    gates = _gates(definition, assignment, examples.num_rows, population)
    expected, window = definition.gates.expected_partitions, definition.observation_window
    if expected is not None:  # every day of the window a partition, or declared empty
        gates += expected_partitions_gates(expected, window.days(), window.column, examples.keys())
    if definition.derive or definition.aggregate is not None:  # values the recipe computed: Pandera checks them against the output contract
        report = validate(examples.whole(), definition.contract)
        gates.append(GateResult("rows_satisfy_contract", report.passed, dict(report.summary())))
    if declared_rules(definition.contract):  # docs/contracts.md
        gates += semantic_gates(platform, definition.name, definition.version, definition.contract, examples.whole())
    gates += integrity_gates(platform, definition, examples, pins)  # poisoning signals: docs/quarantine.md
    progress.advance(len(gates))
    return splits, gates


def publication_steps(progress: Progress) -> Callable[[BuildStep, str], None]:
    """The publisher's steps as stages: each part written advances ``parts``; sealed starts ``publish``, published ``alias``."""

    def on_step(step: BuildStep, detail: str) -> None:
        if step is BuildStep.PART_WRITTEN:
            progress.advance(1)
        elif step is BuildStep.SEALED:
            progress.stage("publish", unit="")
        elif step is BuildStep.PUBLISHED:
            progress.stage("alias", unit="")
        elif step is BuildStep.ALIAS_MOVED:
            progress.done()

    return on_step


def _complete_alias_move(publisher: Publisher, done: Realization) -> None:
    """Point ``candidate`` at ``done`` when it still names an older realization (or none): what the killed build did not do.

    A realization published after ``done`` keeps the alias; the move is the publisher's compare-and-swap.
    """
    registry = publisher.registry
    current = registry.get_alias(done.dataset, done.version, ALIAS)
    if current is not None and current.target == done.manifest_hash:
        return
    named = registry.find_by_manifest_hash(current.target) if current is not None else None
    newer = named is not None and named.published_at is not None and done.published_at is not None and named.published_at > done.published_at
    if not newer:
        publisher.move_alias(done, ALIAS)


def realization_subjects(platform: Platform, definition: DatasetDefinition) -> tuple[str, ...]:
    """The subject columns of ``definition``'s output: its sources' entity columns present in the output contract."""
    entities = [platform.config.sources[s].entity for s in definition.sources if s in platform.config.sources]
    return tuple(dict.fromkeys(e for e in entities if e is not None and e in definition.contract.column_names))


__all__ = [
    "ALIAS", "REPO", "Pin", "Pinned", "RealizationBuild", "RealizationBuildError", "SplitsCheck", "build_examples", "build_publisher", "build_realization",
    "build_request", "check_splits", "code_pin", "environment_lockfile", "environment_pin", "example_id", "logical_key", "pin_build", "realization_subjects",
    "reused_build", "runner_timezone", "versioned_key",
]  # fmt: skip
