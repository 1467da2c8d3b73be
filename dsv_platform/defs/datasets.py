"""Dataset assets from declarative definitions: one ``datasets/<name>/<version>`` per file, and ``.../splits`` when it has a split policy."""

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg

from dsv_platform.core import canonical_json
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.publication.card import card_markdown
from dsv_platform.core.publication.gates import GateResult, GatesFailedError
from dsv_platform.defs import keys
from dsv_platform.defs.catalog import code_version, dataset_table, freshness_policy, owners, schema_metadata, table_metadata
from dsv_platform.defs.gate_checks import dataset_gates_spec, failed_gate_events, snapshot_check_results
from dsv_platform.defs.integrity_checks import build_quarantine_check, integrity_check_specs
from dsv_platform.defs.metadata import AssetResult, table
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import PUBLICATION_POOL, STEP_RETRY, retried_if_transient
from dsv_platform.defs.semantic_checks import semantic_check_specs
from dsv_platform.services.publication.approval import approval_of_ref, approval_text, find_realization
from dsv_platform.services.publication.card import card_of
from dsv_platform.services.publication.realization import RealizationBuild, SplitsCheck, build_realization, check_splits
from dsv_platform.services.publication.semantic_gate import stored_gates
from dsv_platform.services.publication.status import realization_lag

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

SPLITS_ARE_ENTITY_DISJOINT = "splits_are_entity_disjoint"
REF = "ref"


def upstream_ref(context: dg.AssetExecutionContext, key: dg.AssetKey) -> str:
    """The realization reference the latest materialization of ``key`` published (the exact pinned upstream)."""
    materialized = keys.latest_materialization(context.instance, key)  # or under its flat key, recorded before the upgrade
    if materialized is None or REF not in materialized.metadata:
        raise dg.Failure(f"{key.to_user_string()} has not published a realization yet; materialize it first", allow_retries=False)
    return str(materialized.metadata[REF].value)


def snapshot_deps(definition: DatasetDefinition) -> list[dg.AssetDep]:
    """Every partition of the canonical sources, and the pinned version of the label (if any)."""
    deps = [dg.AssetDep(keys.canonical(s), partition_mapping=dg.AllPartitionMapping()) for s in definition.sources]
    deps += [dg.AssetDep(keys.head(s)) for s in definition.sources]  # staleness across the daily partitions (defs/canonical.py)
    if definition.label is not None:
        mapping = dg.SpecificPartitionsPartitionMapping([f"v{definition.label.version}"])
        deps.append(dg.AssetDep(keys.label(definition.label.name), partition_mapping=mapping))
    return deps


def snapshot_code_version(definition: DatasetDefinition) -> str:
    """The recipe (sources, window, joins, labels pinned, split policy) and the contract's schema: a change of either is a code change."""
    return code_version(definition.recipe_hash, definition.contract.schema_hash)


def snapshot_data_version(build: RealizationBuild) -> str:
    """The content hash, with the label version joined: an unrelated append re-pins (a new manifest) but the same rows stay in sync."""
    labels = build.manifest.labels
    return build.content_hash if labels is None else f"{build.content_hash}+{labels.name}:{labels.version}"


def snapshot_result(build: RealizationBuild, approval: dict[str, str | None] | None = None, gates: Sequence[GateResult] | None = None) -> AssetResult:
    """The snapshot's materialization; ``gates``: the gates to show (default the build's: a reused build passes its stored report's)."""
    m = build.manifest
    approval = approval or {"state": "PUBLISHED"}
    gates = build.gates if gates is None else gates
    return dg.MaterializeResult(
        data_version=dg.DataVersion(snapshot_data_version(build)),
        metadata={
            REF: dg.MetadataValue.text(build.ref),
            "manifest_hash": dg.MetadataValue.text(build.manifest_hash),
            "content_hash": dg.MetadataValue.text(build.content_hash),
            "state": dg.MetadataValue.text(str(approval["state"])),  # PUBLISHED, ELIGIBLE (approved), ...
            "approval": dg.MetadataValue.text(approval_text(approval)),
            "reused": dg.MetadataValue.bool(build.reused),  # True: same pinned inputs, the realization already published
            "label_version": dg.MetadataValue.text(f"{m.labels.name}:{m.labels.version}" if m.labels else "none"),
            "watermark": dg.MetadataValue.text(m.watermark or ""),
            "rows": dg.MetadataValue.int(m.rows),
            **table_metadata(dataset_table(m.dataset, m.version), m.rows),
            "pinned_snapshots": table(["table", "snapshot id", "tag"], [(p.table, p.snapshot_id, p.tag) for p in build.pins]),
            "split_sizes": table(["split", "rows"], sorted(build.split_counts.items())),
            "split_counts": dg.MetadataValue.json(dict(sorted(build.split_counts.items()))),
            "partitions": table(["partition", "rows", "hash"], [(p.key, p.rows, p.hash[:16]) for p in m.partitions]),
            "gates": table(["gate", "passed", "blocking"], [(g.name, g.passed, g.blocking) for g in gates]),
            "gate_results": dg.MetadataValue.json([{"name": g.name, "passed": g.passed, "blocking": g.blocking} for g in gates]),
            "gates_of": dg.MetadataValue.text(f"{build.ref} (its stored quality report)" if build.reused else "this build"),
        },
    )


def splits_result(result: SplitsCheck) -> AssetResult:
    return dg.MaterializeResult(
        data_version=dg.DataVersion(result.assignment_hash),
        metadata={
            REF: dg.MetadataValue.text(result.ref),
            "assignment_hash": dg.MetadataValue.text(result.assignment_hash),
            "split_sizes": table(["split", "rows"], sorted(result.counts.items())),
            "policy": dg.MetadataValue.json(dict(result.policy)),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=SPLITS_ARE_ENTITY_DISJOINT,
                passed=result.report.passed,
                metadata={f.name: dg.MetadataValue.json(f.to_document()) for f in result.report.findings},
            )
        ],
    )


def snapshot_check_specs(definition: DatasetDefinition) -> list[dg.AssetCheckSpec]:
    key = keys.snapshot(definition)
    return [*semantic_check_specs(definition, key), *integrity_check_specs(definition, key), dataset_gates_spec(key)]


def snapshot_description(definition: DatasetDefinition) -> str:
    return (
        f"{definition.ref}: {definition.description} Each materialization pins the source snapshots with an Iceberg tag, "
        "reads them as known at the watermark, joins the pinned label version (if any) and publishes an immutable realization. "
        "Data version = content hash (+ label version): a rebuild with the same rows keeps downstream in sync; the manifest hash "
        "is in the metadata, open it with `open_dataset(<ref>)`. Code version = recipe and schema."
    )


def snapshot_materialization(platform: "Platform", definition: DatasetDefinition, build: RealizationBuild) -> AssetResult:
    """The snapshot's materialization and check results for ``build`` (a reused build's gates from its stored report)."""
    gates = stored_gates(platform, build.manifest_hash, None) if build.reused else list(build.gates)  # reused: the gates it passed then
    result = snapshot_result(build, approval_of_ref(platform.registry, build.ref), gates)
    realization = find_realization(platform.registry, build.ref)
    card = card_of(platform, realization, build.manifest)  # the dataset card, shown in the UI
    shown = {"dataset_card": dg.MetadataValue.md(card_markdown(card)), "dataset_card_object": dg.MetadataValue.text(card["stored_card"] or "")}
    metadata = {**(result.metadata or {}), **shown, **lag_metadata(realization_lag(platform.registry, realization))}
    replaced: AssetResult = result._replace(check_results=snapshot_check_results(definition, gates), metadata=metadata)
    return replaced


def lag_metadata(lag: dict[str, float | None]) -> dict[str, dg.MetadataValue]:
    """The realization's lag from valid time as numbers the UI plots over materializations (``lag_event_s``, ...), and whole."""
    plotted = {f"lag_{k}": dg.MetadataValue.float(float(v)) for k, v in lag.items() if v is not None}
    return {**plotted, "lag": dg.MetadataValue.json(lag)}


def build_snapshot_asset(definition: DatasetDefinition) -> dg.AssetsDefinition:
    """``datasets/<name>/<version>``: one step, or with ``fan_out`` > 1 a plan, parallel prepare steps and a seal (defs/fanout.py)."""
    if definition.fan_out > 1:
        from dsv_platform.defs.fanout import build_fanout_snapshot_asset

        return build_fanout_snapshot_asset(definition)

    @dg.asset(
        key=keys.snapshot(definition),
        group_name="datasets",
        kinds={"parquet"},
        owners=owners(definition.owner),
        freshness_policy=freshness_policy(definition.slo),
        metadata=schema_metadata(definition.contract),
        code_version=snapshot_code_version(definition),
        pool=PUBLICATION_POOL,  # one publishing step at a time on the instance, whatever started the run
        retry_policy=STEP_RETRY,
        deps=snapshot_deps(definition),
        check_specs=snapshot_check_specs(definition),
        description=snapshot_description(definition),
    )
    def _snapshot(context: dg.AssetExecutionContext, platform: PlatformResource) -> Iterator[Any]:
        with retried_if_transient():
            try:
                build = build_realization(platform.get(), definition, progress=platform.progress(context, f"{definition.ref}: "))
            except GatesFailedError as exc:  # every check's result, then the step fails naming the rules (defs/gate_checks.py)
                yield from failed_gate_events(definition, exc)
                return
            yield snapshot_materialization(platform.get(), definition, build)

    return _snapshot


def build_splits_asset(definition: DatasetDefinition) -> dg.AssetsDefinition:
    snapshot_key, key = keys.snapshot(definition), keys.splits(definition)

    @dg.asset(
        key=key,
        group_name="datasets",
        kinds={"parquet"},
        owners=owners(definition.owner),
        code_version=code_version(canonical_json.sha256_hex(definition.split_policy or {})),
        retry_policy=STEP_RETRY,
        deps=[snapshot_key],
        check_specs=[
            dg.AssetCheckSpec(SPLITS_ARE_ENTITY_DISJOINT, asset=key, blocking=True, description=f"no {definition.entity_column} appears in two splits")
        ],
        description=f"The materialized split assignment of the latest {definition.ref} realization (policy from the definition), "
        "cross-checked against its manifest. Data version = assignment hash.",
    )
    def _splits(context: dg.AssetExecutionContext, platform: PlatformResource) -> AssetResult:
        with retried_if_transient():
            return splits_result(check_splits(platform.get(), upstream_ref(context, snapshot_key), definition))

    return _splits


def build_dataset_assets(definition: DatasetDefinition) -> list[dg.AssetsDefinition]:
    """The snapshot asset, and the splits asset when the definition has a split policy."""
    if definition.split_policy is None:
        return [build_snapshot_asset(definition), build_quarantine_check(definition)]
    return [build_snapshot_asset(definition), build_splits_asset(definition), build_quarantine_check(definition)]


PUBLICATION_TAG = "dsv/publication"
"""Run tag of the jobs that publish realizations (queued runs: deploy/dagster.yaml admits one such run at a time).

The step-level limit that also holds for ad-hoc runs and ``dsv build`` is the pool :data:`PUBLICATION_POOL` (defs/retries.py)."""


def build_publication_job(definition: DatasetDefinition) -> Any:  # an unresolved asset job
    """``publish_<dataset>_<version>``: the snapshot and its splits in one run tagged :data:`PUBLICATION_TAG`."""
    return dg.define_asset_job(
        f"publish_{definition.asset_prefix}",
        selection=dg.AssetSelection.assets(keys.snapshot(definition), *([keys.splits(definition)] if definition.split_policy is not None else [])),
        tags={PUBLICATION_TAG: definition.ref},
        description=f"Build and publish {definition.ref} and check its splits; one publication run at a time on the production instance.",
    )
