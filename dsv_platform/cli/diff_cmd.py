"""`dsv diff REF_A REF_B [--json]`: what changed between two realizations, or two model runs or artifacts, for an auditor.

Exit 0 whether or not they differ; resolution failures keep their exit codes (3-7). Two model runs or
artifacts (``model_run:...``, ``artifact:...``, or a name or hash) are compared manifest against manifest
first (:mod:`dsv_platform.cli.diff_runs`).

Details: docs/diff.md
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.core.diff.diff import DEFAULT_EXAMPLES
from dsv_platform.core.diff.diff_report import RealizationDiff
from dsv_platform.core.errors import ConfigurationError, ResolutionError
from dsv_platform.services.publication.diff import diff_realizations
from dsv_platform.services.reproduction.run_diff import is_run_target

TOP_COLUMNS = 8
HELP = "rows added/removed/changed, partitions, columns, label flips and split moves between two realizations; or two model runs' manifests"


def _keys(sample: dict[str, Any]) -> str:
    shown = ", ".join(json.dumps(k, default=str) for k in sample["examples"])
    return f"  e.g. {shown}" if shown else ""


def _n(rows: int | None) -> str:
    return "-" if rows is None else f"{rows:,}"


def _flips(doc: dict[str, Any]) -> list[str]:
    lines = []
    for f in doc["label_flips"]:
        up, down = f["0->1"], f["1->0"]
        lines.append(f"label flips  {f['column']}: 0->1 {up['count']:,}{_keys(up)}")
        lines.append(f"             {f['column']}: 1->0 {down['count']:,}{_keys(down)}")
    return lines


def _manifest_lines(doc: dict[str, Any]) -> list[str]:
    lines = []
    splits = doc["split_reassignments"]
    if splits is None:
        lines.append("splits       not compared (one side has no split assignment)")
    else:
        moves = ", ".join(f"{k} {v:,}" for k, v in splits["moves"].items())
        lines.append(f"splits       {splits['count']:,} example(s) reassigned" + (f" ({moves})" if moves else "") + _keys(splits))
    differing = [s for s in doc["sources"] if not s["same"]]
    lines.append(f"sources      {len(doc['sources']) - len(differing)} pinned snapshot(s) the same, {len(differing)} differ")
    lines += [f"             {s['table']}: {s['a'] or '-'} -> {s['b'] or '-'}" for s in differing]
    label = doc["label_version"]
    lines.append(f"label        {label['a'] or '-'}" + ("  (same)" if label["same"] else f" -> {label['b'] or '-'}"))
    return lines


def summary(diff: RealizationDiff) -> str:
    """The compact human summary: counts, partitions, top columns, flips, reassignments, pins."""
    doc = diff.to_document()
    parts = doc["partitions"]
    lines = [
        f"a  {doc['a']['ref']}  ({doc['a']['rows']:,} rows)",
        f"b  {doc['b']['ref']}  ({doc['b']['rows']:,} rows)",
        "identical content" if doc["identical"] else "content differs",
        f"rows         added {doc['added']['count']:,}  removed {doc['removed']['count']:,}  changed {doc['changed']['count']:,}  "
        f"unchanged {doc['unchanged']:,}  (key {', '.join(doc['key'])})",
    ]
    for name in ("added", "removed", "changed"):
        if doc[name]["count"]:
            lines.append(f"  {name:<10} {_keys(doc[name]).strip()}")
    lines.append(f"partitions   {parts['equal']} equal (not read), {parts['changed']} changed, {parts['only_in_a']} only in a, {parts['only_in_b']} only in b")
    lines += [f"             {p['key']}: {p['status']} ({_n(p['rows_a'])} -> {_n(p['rows_b'])} rows)" for p in parts["differ"][:TOP_COLUMNS]]
    if len(parts["differ"]) > TOP_COLUMNS:
        lines.append(f"             ... {len(parts['differ']) - TOP_COLUMNS} more (--json lists all)")
    top = [(c, n) for c, n in doc["columns"]["changed"].items() if n][:TOP_COLUMNS]
    lines.append("columns      " + (", ".join(f"{c} {n:,}" for c, n in top) if top else "no value changed among rows in both"))
    for side in ("only_in_a", "only_in_b"):
        if doc["columns"][side]:
            lines.append(f"             {side.replace('_', ' ')}: {', '.join(doc['columns'][side])}")
    return "\n".join(lines + _flips(doc) + _manifest_lines(doc))


def _failure_json(exc: ResolutionError) -> str:
    return json.dumps({"error": exc.kind.name, "exit_code": exc.exit_code, "ref": exc.ref, "message": str(exc), "detail": exc.detail}, default=str)


@with_platform
def _diff(args: argparse.Namespace, platform: Platform) -> int:
    if args.examples < 0:
        raise ConfigurationError(f"--examples {args.examples}: must be 0 or more")
    runs = [is_run_target(r) for r in (args.ref_a, args.ref_b)]
    if any(runs):
        if not all(runs):
            raise ConfigurationError(f"dsv diff {args.ref_a} {args.ref_b}: compare two realizations, or two model runs or artifacts, not one of each")
        from dsv_platform.cli.diff_runs import diff_run_command

        return diff_run_command(args, platform)
    if args.data:
        raise ConfigurationError("--data compares the realizations two model runs or artifacts read; REF_A and REF_B are realizations")
    try:
        diff = diff_realizations(platform, args.ref_a, args.ref_b, label_columns=args.label, examples=args.examples, actor=platform.actor)
    except ResolutionError as exc:
        if args.json:
            print(_failure_json(exc))
        raise
    print(json.dumps(diff.to_document(), indent=2, default=str) if args.json else summary(diff))
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diff", help=HELP)
    p.add_argument(
        "ref_a",
        metavar="REF_A",
        help="the old realization (NAME:VERSION, NAME:VERSION@sha256:<hash>, NAME:VERSION@ALIAS), or a model run or artifact "
        "(model_run:<hash|name>, artifact:<hash|footer|name>)",
    )
    p.add_argument("ref_b", metavar="REF_B", help="the new realization, model run or artifact")
    p.add_argument("--json", action="store_true", help="one JSON object (docs/diff.md)")
    p.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, metavar="N", help=f"example keys per count (default {DEFAULT_EXAMPLES})")
    p.add_argument(
        "--label", action="append", metavar="COLUMN", help="a 0/1 label column to count flips of (repeatable; default: the pinned label's bool columns)"
    )
    p.add_argument("--data", action="store_true", help="with two model runs or artifacts: also diff each realization they read that differs")
    p.set_defaults(handler=_diff)
