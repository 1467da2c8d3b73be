"""`dsv deploy record MODEL_REF --target NAME` and `dsv deploy list`: which model version serves where (lineage nodes).

The actor is the proven identity and the time is now; a target's newest deployment is its current one,
which keeps the model and its training set from GC. Every command takes --json.
"""

from __future__ import annotations

import argparse

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.cli.model_cmd import REF_HELP, print_doc


@with_platform
def _deploy_record(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.deployments import record_deployment

    d = record_deployment(platform, args.ref, target=args.target, reason=args.reason or "")
    return print_doc(args, d.to_document(), f"deployed {d.model}@sha256:{d.run_hash} on {d.target} (deployment #{d.id}, by {d.actor} at {d.at.isoformat()})")


@with_platform
def _deploy_list(args: argparse.Namespace, platform: Platform) -> int:
    from dsv_platform.services.reproduction.deployments import deployments

    found = deployments(platform, target=args.target, current_only=args.current)
    state = {True: "current", False: "replaced"}
    lines = [f"#{d.id:<4} {d.target}  {d.model}@sha256:{d.run_hash}  {state[d.current]}  by {d.actor} at {d.at.isoformat()}" for d in found]
    return print_doc(args, [d.to_document() for d in found], "\n".join(lines) or "no deployments recorded")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    deploy = sub.add_parser("deploy", help="record that a model version serves on a target (a lineage node); list deployments").add_subparsers(
        dest="deploy_command", metavar="ACTION"
    )
    deploy.required = True
    p = deploy.add_parser("record", help="record that MODEL_REF now serves on --target (actor: the proven identity; time: now)")
    p.add_argument("ref", metavar="MODEL_REF", help=REF_HELP)
    p.add_argument("--target", required=True, metavar="NAME", help="where it serves (e.g. fraud-scoring-eu)")
    p.add_argument("--reason", help="a note kept with the event")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_deploy_record)
    p = deploy.add_parser("list", help="deployment events, newest first; each target's newest is its current one")
    p.add_argument("--target", metavar="NAME")
    p.add_argument("--current", action="store_true", help="only each target's current deployment")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_deploy_list)
