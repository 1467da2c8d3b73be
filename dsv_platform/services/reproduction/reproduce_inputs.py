"""Steps 3 and 6 of reproducing an artifact: every pinned input resolved and re-hashed, and the rebuild from raw.

Each input is opened by the realization it pinned (``name:version@sha256:<snapshot_id>``), re-hashed
and written as an Arrow IPC file for the runner. An EXPIRED or CORRUPT input, or one whose content no
longer hashes to ``dataset_hash``, is rebuilt from raw up to its watermark at the recorded transform
version (services/reproduction/raw_rebuild.py); a REDACTED or unknown input is never rebuilt.

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.ipc

from dsv_platform.core.errors import ResolutionError
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.reproduction.reproduction import Outcome, outcome_of_failure
from dsv_platform.core.reproduction.reproduction_steps import Step, failed, passed
from dsv_platform.services.publication.datasets import load_manifest, open_dataset
from dsv_platform.services.reproduction.raw_rebuild import RawMissingError, TransformChangedError, rebuild_from_raw

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

REBUILDABLE = (Outcome.EXPIRED, Outcome.CORRUPT, Outcome.HASH_MISMATCH)


@dataclass(frozen=True)
class Resolved:
    """Step 3's outcome: the IPC file of every input that re-hashed, and what is wrong with the others."""

    step: Step
    tables: Mapping[str, Path]
    broken: Mapping[str, tuple[Outcome, str]] = field(default_factory=dict)

    @property
    def unrebuildable(self) -> bool:
        return any(outcome not in REBUILDABLE for outcome, _ in self.broken.values())


def write_ipc(table: pa.Table, path: Path) -> Path:
    with pa.OSFile(str(path), "wb") as sink, pyarrow.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return path


def _now_resolves(platform: Platform, ref: str) -> str | None:
    try:
        return platform.registry.resolve_ref(parse_ref(ref)).manifest_hash
    except ResolutionError:
        return None


def _one(platform: Platform, entry: Mapping[str, str], path: Path, actor: str) -> tuple[Outcome, str] | None:
    pinned = f"{entry['dataset']}@sha256:{entry['snapshot_id']}"
    try:
        with open_dataset(platform, pinned, actor=actor) as ds:
            content = ds.verify_content()
            if content != entry["dataset_hash"]:
                return Outcome.HASH_MISMATCH, f"{pinned}: content hashes to {content}, the manifest recorded {entry['dataset_hash']}"
            write_ipc(ds.to_arrow(), path)
    except ResolutionError as exc:
        return outcome_of_failure(exc.kind), f"{pinned}: {exc}"
    return None


def resolve_inputs(platform: Platform, manifest: Mapping[str, Any], workdir: Path, *, actor: str) -> Resolved:
    """Step 3 (see the module docstring)."""
    tables: dict[str, Path] = {}
    broken: dict[str, tuple[Outcome, str]] = {}
    seen: dict[str, Any] = {}
    for i, entry in enumerate(manifest["inputs"]):
        path = workdir / f"input-{i}.arrow"
        problem = _one(platform, entry, path, actor)
        now = _now_resolves(platform, entry["ref"])
        seen[entry["dataset"]] = {**entry, "ref_now_resolves_to": now, "problem": None if problem is None else problem[1]}
        if problem is None:
            tables[entry["dataset"]] = path
        else:
            broken[entry["dataset"]] = problem
    if broken:
        worst = next((o for o, _ in broken.values() if o not in REBUILDABLE), next(iter(broken.values()))[0])
        named = "; ".join(f"{outcome.value} {why}" for outcome, why in broken.values())
        return Resolved(failed(3, worst, named, inputs=seen), tables, broken)
    summary = f"{len(tables)} input(s) resolved by their pinned realization and re-hashed to the recorded dataset hash"
    return Resolved(passed(3, summary, inputs=seen), tables)


def rebuild_inputs(platform: Platform, manifest: Mapping[str, Any], resolved: Resolved, workdir: Path) -> tuple[dict[str, Path], list[str], Step | None]:
    """Step 6's rebuild: every broken input from raw (or a failed step 6 naming why it cannot be)."""
    tables = dict(resolved.tables)
    notes: list[str] = []
    by_name = {e["dataset"]: e for e in manifest["inputs"]}
    for dataset, (outcome, _why) in sorted(resolved.broken.items()):
        entry = by_name[dataset]
        realization = platform.registry.find_by_manifest_hash(entry["snapshot_id"])
        if realization is None:
            return tables, notes, failed(6, Outcome.NOT_FOUND, f"{dataset}: realization {entry['snapshot_id']} is not in the registry; nothing to rebuild")
        try:
            recorded = load_manifest(platform.registry, realization)
            with tempfile.TemporaryDirectory(prefix="dsv-rebuild-", dir=workdir) as scratch:
                rebuilt = rebuild_from_raw(platform, recorded, workdir=Path(scratch))
        except (ResolutionError, RawMissingError, TransformChangedError) as exc:
            return tables, notes, failed(6, outcome, f"{dataset}: cannot rebuild from raw: {exc}", dataset=dataset)
        if rebuilt.content_hash != entry["dataset_hash"]:
            why = f"{dataset}: rebuilt from {rebuilt.batches} raw batches to {rebuilt.content_hash}, the manifest recorded {entry['dataset_hash']}"
            return tables, notes, failed(6, Outcome.HASH_MISMATCH, why, dataset=dataset, rebuilt_hash=rebuilt.content_hash)
        tables[dataset] = write_ipc(rebuilt.examples, workdir / f"rebuilt-{len(notes)}.arrow")
        notes.append(f"{dataset}@sha256:{entry['snapshot_id']} rebuilt from {rebuilt.batches} raw batches up to {recorded.watermark} ({outcome.value})")
    return tables, notes, None
