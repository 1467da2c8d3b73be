"""Locating the two sides of ``dsv diff RUN_A RUN_B``: model runs and artifacts from the registry's run records.

A side is ``model_run:<hash, prefix or model name>``, ``artifact:<hash, footer or name>``, or the same
without the prefix when only one kind matches. The stored manifest must hash to the name the record
gives it (else CORRUPT). Each input realization's label pin is read from its manifest in the registry;
a realization the registry no longer holds shows no label (its manifest hash still shows).

Details: docs/diff.md
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsv_platform.adapters.registry.artifacts import RunRecord, RunRecords
from dsv_platform.core import canonical_json
from dsv_platform.core.diff.run_diff import ARTIFACT, MODEL_RUN, RunDiff, RunInput, RunSide, diff_runs
from dsv_platform.core.errors import CorruptError, NotFoundError
from dsv_platform.services.publication.datasets import load_manifest

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform

KINDS = (MODEL_RUN, ARTIFACT)


def is_run_target(text: str) -> bool:
    """A model run or artifact rather than a realization reference (those always hold ``:``, as ``name:version``)."""
    stripped = text.strip()
    return stripped.startswith(tuple(f"{k}:" for k in KINDS)) or ":" not in stripped


def _record(platform: Platform, target: str) -> RunRecord:
    text = target.strip()
    kind, _, rest = text.partition(":")
    kinds, key = ((kind,), rest) if kind in KINDS and rest else (KINDS, text)
    found, misses = [], []
    for k in kinds:
        try:
            found.append(RunRecords(platform.registry).locate(k, key))
        except NotFoundError as exc:
            misses.append(str(exc))
    if not found:
        raise NotFoundError(f"{text!r} names no complete model run or artifact ({'; '.join(misses)})", ref=text)
    if len(found) > 1:
        raise NotFoundError(f"{text!r} names both a model run and an artifact: write model_run:{key} or artifact:{key}", ref=text)
    return found[0]


def _label(platform: Platform, manifest_hash: str | None) -> str | None:
    found = platform.registry.find_by_manifest_hash(manifest_hash) if manifest_hash else None
    if found is None:
        return None
    labels = load_manifest(platform.registry, found).labels
    return f"{labels.name}:{labels.version}" if labels is not None else None


def _inputs(platform: Platform, kind: str, doc: Mapping[str, Any]) -> tuple[RunInput, ...]:
    if kind == MODEL_RUN:
        r = doc.get("realization") or {}
        ref, mh = str(r.get("ref", "")), r.get("manifest_hash")
        found = platform.registry.find_by_manifest_hash(mh) if mh else None
        content = found.content_hash if found is not None else None
        return (RunInput(ref.split(":", 1)[0], ref, mh, content, _label(platform, mh)),)
    return tuple(
        RunInput(str(i["dataset"]), str(i["ref"]), str(i["snapshot_id"]), str(i["dataset_hash"]), _label(platform, str(i["snapshot_id"])))
        for i in doc.get("inputs", [])
    )


def locate_run(platform: Platform, target: str) -> RunSide:
    """The complete model run or artifact ``target`` names, its manifest checked against its hash."""
    record = _record(platform, target)
    doc = dict(record.manifest or {})
    if record.manifest_hash is None or canonical_json.sha256_hex(doc) != record.manifest_hash:
        raise CorruptError(f"{record.kind} run #{record.id}: its stored manifest does not hash to {record.manifest_hash}", ref=target)
    return RunSide(record.kind, record.name, record.manifest_hash, doc, _inputs(platform, record.kind, doc))


def diff_run_targets(platform: Platform, a: str, b: str) -> RunDiff:
    """The manifest diff of two model runs or artifacts (:func:`dsv_platform.core.diff.run_diff.diff_runs`)."""
    return diff_runs(locate_run(platform, a), locate_run(platform, b))


__all__ = ["diff_run_targets", "is_run_target", "locate_run"]
