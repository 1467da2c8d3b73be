"""`dsv diff RUN_A RUN_B`: two model runs or artifacts, manifest against manifest, then the realizations they read.

The summary lists every differing leaf by section (code, configuration, data, labels, seed,
environment, outcome), then, for each input whose realization differs, the ``dsv diff`` line
that compares those two realizations; ``--data`` runs it as well.

Details: docs/diff.md
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from dsv_platform.bootstrap import Platform
from dsv_platform.core.diff.run_diff import SECTIONS, RunDiff
from dsv_platform.services.publication.diff import diff_realizations
from dsv_platform.services.reproduction.run_diff import diff_run_targets

SHOWN = 20
"""Changed leaves printed per section (``--json`` lists all)."""


def _value(v: Any) -> str:
    return "-" if v is None else v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)


def _section_lines(diff: RunDiff, section: str) -> list[str]:
    changes = [c for c in diff.changes if c.section == section]
    if not changes:
        return [f"{section:<14}same"]
    lines = [f"{section if i == 0 else '':<14}{c.name}: {_value(c.a)} -> {_value(c.b)}" for i, c in enumerate(changes[:SHOWN])]
    if len(changes) > SHOWN:
        lines.append(f"{'':<14}... {len(changes) - SHOWN} more (--json lists all)")
    return lines


def run_summary(diff: RunDiff) -> str:
    """Both sides, the verdict, the changed leaves per section, and the realization diffs on offer."""
    lines = [f"a  {diff.a.ref}  ({diff.a.kind.replace('_', ' ')} {diff.a.name})", f"b  {diff.b.ref}  ({diff.b.kind.replace('_', ' ')} {diff.b.name})"]
    changed = diff.changed_sections()
    lines.append("identical manifests" if diff.identical else f"differs in: {', '.join(changed)}")
    for section in SECTIONS:
        lines += _section_lines(diff, section)
    for pair in diff.data_pairs:
        if pair.a and pair.b:
            lines.append(f"data {pair.dataset} differs; compare the realizations: dsv diff {pair.a} {pair.b}")
        else:
            lines.append(f"data {pair.dataset} is read by one side only ({pair.a or pair.b})")
    return "\n".join(lines)


def diff_run_command(args: argparse.Namespace, platform: Platform) -> int:
    """The run branch of ``dsv diff``: print the manifest diff, and with ``--data`` each realization diff after it."""
    from dsv_platform.cli.diff_cmd import summary  # the realization summary (diff_cmd imports this module lazily)

    diff = diff_run_targets(platform, args.ref_a, args.ref_b)
    pairs = [p for p in diff.data_pairs if p.a and p.b] if args.data else []
    data = [(p, diff_realizations(platform, p.a, p.b, label_columns=args.label, examples=args.examples, actor=platform.actor)) for p in pairs if p.a and p.b]
    if args.json:
        doc = diff.to_document()
        for entry, (_, found) in zip([d for d in doc["realization_diffs"] if d["a"] and d["b"]], data, strict=False):
            entry["diff"] = found.to_document()
        print(json.dumps(doc, indent=2, default=str))
        return 0
    print(run_summary(diff))
    for pair, found in data:
        print(f"\n# realization diff of {pair.dataset}\n{summary(found)}")
    return 0


__all__ = ["diff_run_command", "run_summary"]
