"""`dsv build NAME:VERSION [--json] [--submit [URL]]`: materialize a dataset's snapshot and splits as one recorded Dagster run.

In this process on the embedded default's instance; with ``--submit``, as a run of ``publish_<dataset>_<version>`` on the
production instance (its queue and publication limit), followed to its end (cli/submit.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.cli.progress import stage_progress
from dsv_platform.cli.runs import IN_PROCESS_JOB, Runner, UnknownNameError, asset_metadata, check_lines
from dsv_platform.cli.submit import add_submit_argument, submit, webserver
from dsv_platform.core.config.dataset_definition import DatasetDefinition
from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.trust.trust import Role
from dsv_platform.defs import keys
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.launch import launch_tags

JSON_KEYS = ("ref", "manifest_hash", "content_hash", "rows", "split_counts")


def find_definition(config: PlatformConfig, text: str) -> DatasetDefinition:
    """The dataset ``NAME:VERSION`` names, or a one-line error listing the known ones."""
    name, _, version = text.partition(":")
    for d in config.datasets:
        if (d.name, d.version) == (name, version):
            return d
    raise UnknownNameError(f"unknown dataset {text!r}; known: {[d.ref for d in config.datasets]} (configuration {config.folder})")


@with_platform
def _build(args: argparse.Namespace, platform: Platform) -> int:
    definition = find_definition(platform.config, args.dataset)
    trust.require(platform, Role.BUILDER, definition=definition.ref)  # the run checks publisher before it publishes (docs/trust.md)
    if args.launch_tags:  # for a run launched elsewhere (Launchpad, GraphQL, dagster job launch --tags): no build here
        job = args.job or f"publish_{definition.asset_prefix}"
        print(json.dumps(launch_tags(platform, job=job, partition=args.partition)))
        return 0
    snapshot, splits = keys.snapshot(definition), keys.splits(definition)
    assets = [snapshot, splits] if definition.split_policy is not None else [snapshot]  # no split policy: no splits asset
    server = webserver(args, platform.settings)
    if server is not None:  # the instance's queue, launcher and publication limit run it; this process follows
        job = f"publish_{definition.asset_prefix}"
        submitted = submit(server, job, tags=launch_tags(platform, job=job))  # the run records this command's identity as the builder
        return _summary(args, definition, submitted.run_id, submitted.materializations.get(snapshot.to_user_string(), {}), submitted.check_lines())
    runner = Runner.open(platform.settings, platform.config, progress=stage_progress())  # stages on stderr
    proof = launch_tags(platform, job=IN_PROCESS_JOB)  # the run records this command's identity as the builder
    try:
        result = runner.run(assets, launch=proof)
    finally:
        runner.close()
    return _summary(args, definition, result.run_id, asset_metadata(result, snapshot), check_lines(result))


def _summary(args: argparse.Namespace, definition: DatasetDefinition, run_id: str, meta: dict[str, Any], checks: list[str]) -> int:
    doc = {k: meta[k] for k in JSON_KEYS}
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"built {definition.ref} in run {run_id}")
    print(f"  ref            {doc['ref']}  ({meta['state']})")
    print(f"  manifest_hash  {doc['manifest_hash']}")
    print(f"  content_hash   {doc['content_hash']}")
    print(f"  rows           {doc['rows']}")
    print(f"  splits         {', '.join(f'{k}={v}' for k, v in doc['split_counts'].items()) or 'none (no split policy)'}")
    for gate in meta.get("gate_results", []):
        print(f"  gate {gate['name']}: {'passed' if gate['passed'] else 'FAILED'}{' (blocking)' if gate['blocking'] else ''}")
    for line in checks:
        print(f"  check {line}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("build", help="materialize a dataset's snapshot and splits (one Dagster run) and print its identity")
    p.add_argument("dataset", metavar="NAME:VERSION", help="a dataset of the configuration (DSV_CONFIG_DIR), e.g. fraud_training_set:v6")
    p.add_argument("--json", action="store_true", help="one JSON object: ref, manifest_hash, content_hash, rows, split_counts")
    add_submit_argument(p)
    p.add_argument("--launch-tags", action="store_true", help="build nothing: print a signed launch request's run tags (JSON) for a run launched elsewhere")
    p.add_argument("--job", help="with --launch-tags: the Dagster job the run will be (default publish_<dataset>_<version>)")
    p.add_argument("--partition", help="with --launch-tags: the run's partition key, if any")
    p.set_defaults(handler=_build)
