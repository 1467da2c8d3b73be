"""canonical_<source>: Iceberg tables with valid and recorded time, loaded from the landed batches.

A source contract with semantic keys adds one ``semantic_<family>`` check per rule family
(core.semantic_rules.load_rules), evaluated on each loaded partition as staged on the load's
Iceberg branch; a failed blocking one stops downstream assets and main stays unchanged (the
check names the branch). Details: docs/contracts.md, docs/storage.md
"""

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import dagster as dg

from dsv_platform.core.config.source import SourceSpec, partition_text
from dsv_platform.core.contracts.semantic_rules import load_families
from dsv_platform.core.identity.hashing import content_hash
from dsv_platform.core.publication.gates import GateResult
from dsv_platform.defs import keys
from dsv_platform.defs.catalog import code_version, owners, schema_metadata, table_metadata
from dsv_platform.defs.metadata import AssetResult, failure_cases, table
from dsv_platform.defs.partitions import partition_days
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import STEP_RETRY, retried_if_transient
from dsv_platform.defs.semantic_checks import family_check_results, family_check_specs
from dsv_platform.services.ingest.canonical_load import BatchLoad, PartitionLoad, load_partitions
from dsv_platform.services.publication.semantic_gate import gates_of

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

ROWS_SATISFY_CONTRACT = "rows_satisfy_contract"
STAGING_BRANCH, STAGED_SNAPSHOT = "staging_branch", "staged_snapshot_id"
"""Metadata of a failed blocking check of a blocked load: the branch holding its appends and its head (write-audit-publish)."""
DATA_VERSION_TAG = "dagster/data_version"


def head_version(platform: "Platform", spec: SourceSpec) -> str:
    """The table's current snapshot id as a data version (``empty`` before its first commit)."""
    tables = platform.existing_tables()
    snapshot = tables.current_snapshot_id(spec) if tables is not None and tables.exists(spec) else None
    return "empty" if snapshot is None else str(snapshot)


def build_head_asset(spec: SourceSpec) -> dg.AssetsDefinition:
    """The whole table's version, for staleness: Dagster does not follow a daily-partitioned table into an unpartitioned
    dataset (``AllPartitionMapping`` edges are left out of its stale status), so datasets and labels also depend on
    this observed head. Every canonical load logs an observation of it; "Observe" in the UI catches a change made
    outside a load (a privacy deletion, a schema evolution)."""
    key = keys.head(spec.name)
    described = (
        f"The current Iceberg snapshot of canonical {spec.name} (data version = snapshot id): new canonical data marks the datasets "
        "and labels reading it unsynced. Logged by every canonical load; Observe reads it again."
    )

    def _head(context: dg.AssetExecutionContext) -> Iterator[dg.ObserveResult]:
        yield dg.ObserveResult(asset_key=key, data_version=dg.DataVersion(head_version(context.resources.platform.get(), spec)))

    observed = dg.multi_observable_source_asset(
        name=keys.op_name(key),
        specs=[dg.AssetSpec(key, group_name="table_heads", owners=owners(spec.contract.owner), kinds={"iceberg"}, description=described)],
        required_resource_keys={"platform"},
    )(_head)
    return cast(dg.AssetsDefinition, observed)


def data_version(loads: Sequence[PartitionLoad]) -> str:
    """The partition's content hash; for a ranged run, the hash of the days' content hashes."""
    if len(loads) == 1:
        return loads[0].digest.content_hash
    return content_hash((load.day.isoformat(), load.digest.content_hash) for load in loads)


def semantic_gates(loads: Sequence[PartitionLoad]) -> list[GateResult]:
    """The per-load semantic results of every loaded day as gates, each naming its day."""
    return [replace(g, detail={"day": load.day.isoformat(), **g.detail}) for load in loads for g in gates_of(load.semantic)]


def _batch_row(load: PartitionLoad, b: BatchLoad) -> tuple[object, ...]:
    return (partition_text(load.day), b.record.batch_id, b.record.recorded_at, b.outcome.appended, b.outcome.unchanged, b.rejected, b.outcome.already_applied)


def canonical_result(loads: Sequence[PartitionLoad], families: dict[str, bool] | None = None, table_name: str = "") -> AssetResult:
    """The loaded days' materialization (``table_name``: the Iceberg table, for the catalog) and their check results."""
    failures = [f for load in loads for f in load.failures]
    rejected = sum(load.rejected_rows for load in loads)
    last = loads[-1]
    return dg.MaterializeResult(
        data_version=dg.DataVersion(data_version(loads)),
        metadata={
            "rows": dg.MetadataValue.int(sum(load.rows for load in loads)),
            **(table_metadata(table_name, sum(load.rows for load in loads)) if table_name else {}),
            "content_hash": dg.MetadataValue.text(data_version(loads)),
            "schema_hash": dg.MetadataValue.text(last.digest.schema_hash),
            "snapshot_id": dg.MetadataValue.text(str(last.snapshot_id)),
            **({STAGING_BRANCH: dg.MetadataValue.text(str(last.staged))} if last.staged else {}),
            "rows_rejected": dg.MetadataValue.int(rejected),
            "days": table(
                ["day", "rows", "content hash", "rejected"], [(partition_text(x.day), x.rows, x.digest.content_hash[:16], x.rejected_rows) for x in loads]
            ),
            "batches": table(
                ["day", "batch", "recorded_at", "appended", "unchanged", "rejected", "already applied"],
                [_batch_row(x, b) for x in loads for b in x.batches],
            ),
            "quarantined_batches": table(["batch", "digest", "reason"], [(r.batch_id, r.digest, r.reason) for load in loads for r in load.quarantined]),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=ROWS_SATISFY_CONTRACT,
                passed=not failures,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"failure_cases": failure_cases(failures), "rows_quarantined": dg.MetadataValue.int(rejected)},
            ),
            *staged_results(family_check_results(families or {}, semantic_gates(loads)), loads),
        ],
    )


def staged_results(results: list[dg.AssetCheckResult], loads: Sequence[PartitionLoad]) -> list[dg.AssetCheckResult]:
    """A blocked load's failed blocking checks name the staging branch that holds its appends (main is unchanged)."""
    blocked = next((x for x in loads if x.staged), None)
    if blocked is None:
        return results
    note = f"main unchanged: the load is staged on Iceberg branch {blocked.staged} (snapshot {blocked.staged_snapshot_id}); docs/storage.md"
    staged = {STAGING_BRANCH: dg.MetadataValue.text(str(blocked.staged)), STAGED_SNAPSHOT: dg.MetadataValue.text(str(blocked.staged_snapshot_id))}
    return [
        r._replace(metadata={**(r.metadata or {}), **staged}, description="\n".join([note, *([r.description] if r.description else [])]))
        if not r.passed and r.severity is dg.AssetCheckSeverity.ERROR
        else r
        for r in results
    ]


def build_canonical_asset(spec: SourceSpec, partitions: dg.PartitionsDefinition | None) -> dg.AssetsDefinition:
    key = keys.canonical(spec.name)
    families = load_families(spec.contract)  # empty without semantic keys: no semantic checks

    @dg.asset(
        key=key,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run() if partitions is not None else None,
        group_name="canonical",
        owners=owners(spec.contract.owner),
        metadata=schema_metadata(spec.contract),
        code_version=code_version(spec.contract.schema_hash, spec.valid_time, spec.partition_by),
        retry_policy=STEP_RETRY,
        kinds={"iceberg"},
        deps=[keys.raw(spec.name)],
        check_specs=[
            dg.AssetCheckSpec(
                ROWS_SATISFY_CONTRACT,
                asset=key,
                description=f"landed rows satisfy the contract {spec.contract.name}; failing rows are quarantined, the rest load",
            ),
            *family_check_specs(families, key, "the source contract's per-load"),
        ],
        description=f"{spec.contract.description or spec.name} Parsed, deduplicated and contract-checked; "
        f"valid time `{spec.valid_time or 'none (valid at any time)'}`, recorded time `_recorded_at`. Corrections and late events are new rows: "
        "read as known at T or as corrected now. Data version = content hash of the partition as corrected now.",
    )
    def _canonical(context: dg.AssetExecutionContext, platform: PlatformResource) -> AssetResult:
        with retried_if_transient():
            p = platform.get()
            loads = load_partitions(p, spec, partition_days(context), progress=platform.progress(context, f"{spec.name}: "))
            context.log_event(dg.AssetObservation(asset_key=keys.head(spec.name), tags={DATA_VERSION_TAG: head_version(p, spec)}))
            return canonical_result(loads, families, p.tables.identifier(spec))

    return _canonical
