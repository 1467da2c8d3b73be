"""A dataset snapshot built by parallel steps: ``fan_out: N`` in its definition file (docs/scaling-out.md, "Fan-out").

The asset keeps its key, dependencies, checks and materialization; it is backed by a graph of
ops: ``plan`` (pin, assemble once, split, gate, open the candidate), ``prepare`` mapped over at
most N groups of partitions (each re-assembles the pinned snapshots and hashes and stores its
parts), and ``seal`` (manifest, gates, publish, alias, from the leaves). The executor places the
steps: processes with the multiprocess executor, workers with Celery or Kubernetes.
"""

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.publication.gates import GatesFailedError
from dsv_platform.core.publication.manifest import BuiltPart
from dsv_platform.defs import keys
from dsv_platform.defs.catalog import freshness_policy, owners, schema_metadata
from dsv_platform.defs.datasets import snapshot_check_specs, snapshot_code_version, snapshot_deps, snapshot_description, snapshot_materialization
from dsv_platform.defs.gate_checks import failed_gate_events
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import PUBLICATION_POOL, STEP_RETRY, retried_if_transient
from dsv_platform.services.publication.fanout import FanOutPlan, plan_fanout, prepare_group, seal_fanout


def _ins(definition: DatasetDefinition) -> dict[str, dg.AssetIn]:
    """The snapshot's dependencies as inputs carrying nothing (ordering and lineage only, as the single-step asset's deps)."""
    deps = snapshot_deps(definition)
    return {f"after_{i}": dg.AssetIn(d.asset_key, partition_mapping=d.partition_mapping, dagster_type=dg.Nothing) for i, d in enumerate(deps)}


def _plan_op(definition: DatasetDefinition, inputs: Sequence[str]) -> dg.OpDefinition:
    @dg.op(
        name=f"{definition.asset_prefix}_plan",
        ins={name: dg.In(dg.Nothing) for name in inputs},
        out={"plan": dg.Out(), "groups": dg.DynamicOut()},
        retry_policy=STEP_RETRY,
        description=f"Pin {definition.ref}'s inputs, assemble, split and gate once, open the candidate; up to {definition.fan_out} groups of partitions.",
    )
    def _plan(context: dg.OpExecutionContext, platform: PlatformResource) -> Iterator[dg.Output[Any] | dg.DynamicOutput[Any]]:
        with retried_if_transient():
            plan = plan_fanout(platform.get(), definition, progress=platform.progress(context, f"{definition.ref} plan: "))
            yield dg.Output(plan, "plan")
            for i, keys in enumerate([] if plan.reused else plan.groups(definition.fan_out)):
                yield dg.DynamicOutput(list(keys), mapping_key=f"g{i}", output_name="groups")

    return _plan


def _prepare_op(definition: DatasetDefinition) -> dg.OpDefinition:
    @dg.op(
        name=f"{definition.asset_prefix}_prepare",
        retry_policy=STEP_RETRY,
        description=f"Re-assemble {definition.ref}'s pinned inputs; hash and store one group's parts.",
    )
    def _prepare(context: dg.OpExecutionContext, platform: PlatformResource, plan: FanOutPlan, keys: list[str]) -> list[BuiltPart]:
        with retried_if_transient():
            progress = platform.progress(context, f"{definition.ref} prepare {keys[0]}..{keys[-1]}: ")
            return prepare_group(platform.get(), definition, plan, keys, progress=progress)

    return _prepare


def _seal_op(definition: DatasetDefinition) -> dg.OpDefinition:
    check_outs = {spec.get_python_identifier(): dg.Out(is_required=False) for spec in snapshot_check_specs(definition)}

    @dg.op(
        name=f"{definition.asset_prefix}_seal",
        out={"result": dg.Out(is_required=False), **check_outs},
        pool=PUBLICATION_POOL,  # one publishing step at a time on the instance, whatever started the run
        retry_policy=STEP_RETRY,
        description=f"Seal {definition.ref}'s candidate with every group's parts, gate, publish and move the alias.",
    )
    def _seal(
        context: dg.OpExecutionContext, platform: PlatformResource, plan: FanOutPlan, leaves: list[list[BuiltPart]]
    ) -> Iterator[dg.Output[Any] | dg.AssetCheckResult]:
        with retried_if_transient():
            try:
                build = seal_fanout(platform.get(), definition, plan, leaves, progress=platform.progress(context, f"{definition.ref} seal: "))
            except GatesFailedError as exc:  # every check's result, then the step fails naming the rules (defs/gate_checks.py)
                yield from failed_gate_events(definition, exc)
                return
            result = snapshot_materialization(platform.get(), definition, build)
            yield dg.Output(None, "result", metadata=dict(result.metadata or {}), data_version=result.data_version)
            yield from result.check_results or []

    return _seal


def build_fanout_snapshot_asset(definition: DatasetDefinition) -> dg.AssetsDefinition:
    """The graph-backed ``datasets/<name>/<version>`` of a definition with ``fan_out`` > 1."""
    ins = _ins(definition)
    plan_op, prepare_op, seal_op = _plan_op(definition, list(ins)), _prepare_op(definition), _seal_op(definition)

    def compose(**after: Any) -> Any:
        plan, groups = plan_op(**after)
        leaves = groups.map(lambda keys: prepare_op(plan, keys)).collect()
        return seal_op(plan, leaves)

    compose.__signature__ = inspect.Signature([inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in ins])  # type: ignore[attr-defined]
    asset = dg.graph_asset(
        key=keys.snapshot(definition),
        group_name="datasets",
        kinds={"parquet"},
        owners=owners(definition.owner),
        metadata=schema_metadata(definition.contract),
        code_version=snapshot_code_version(definition),
        ins=ins,
        check_specs=snapshot_check_specs(definition),
        description=snapshot_description(definition),
    )(compose)
    policy = freshness_policy(definition.slo)  # graph_asset takes no freshness policy: set on its spec
    return asset if policy is None else asset.map_asset_specs(lambda spec: spec.replace_attributes(freshness_policy=policy))


__all__ = ["build_fanout_snapshot_asset"]
