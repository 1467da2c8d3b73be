"""The diff of two training runs or artifacts, from their manifests alone: what the design's worked example compares first.

A model run's manifest and an artifact's manifest are brought to one shape, section by section:
``code`` (commit, dirty, repository), ``configuration`` (model or artifact, trainer, parameters,
precision), ``data`` (every input realization by dataset: reference, manifest and content hash),
``labels`` (the label version each input realization pins), ``seed``, ``environment`` (lock, Python,
timezone) and ``outcome`` (metrics and weights, or results). Nested values are compared leaf by leaf
under dotted names. Inputs whose manifests differ are the realization pairs ``dsv diff`` offers next.

Details: docs/diff.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SECTIONS = ("code", "configuration", "data", "labels", "seed", "environment", "outcome")
MODEL_RUN, ARTIFACT = "model_run", "artifact"
_MISSING = None


@dataclass(frozen=True)
class RunInput:
    """One realization a run read: its dataset, reference, manifest and content hash, and its label pin (``name:version``)."""

    dataset: str
    ref: str
    manifest_hash: str | None
    content_hash: str | None = None
    label: str | None = None

    @property
    def pinned_ref(self) -> str:
        """The reference that resolves to exactly this realization (``name:version@sha256:<manifest hash>``)."""
        base = self.ref.split("@", 1)[0]
        return f"{base}@sha256:{self.manifest_hash}" if self.manifest_hash else self.ref


@dataclass(frozen=True)
class RunSide:
    """One side of the diff: ``kind`` (model_run or artifact), its name, the manifest hash and document, its inputs."""

    kind: str
    name: str
    manifest_hash: str
    manifest: Mapping[str, Any]
    inputs: tuple[RunInput, ...]

    @property
    def ref(self) -> str:
        return f"{self.kind}:{self.manifest_hash}"

    def to_document(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "ref": self.ref, "manifest_hash": self.manifest_hash}

    def sections(self) -> dict[str, Any]:
        """The manifest in the common shape (:data:`SECTIONS`)."""
        m = self.manifest
        if self.kind == MODEL_RUN:
            configuration: dict[str, Any] = {"model": m.get("model"), "trainer": m.get("trainer"), "parameters": m.get("parameters", {})}
            outcome: dict[str, Any] = {"metrics": m.get("metrics", {}), "weights_hash": m.get("weights_hash")}
        else:
            configuration = {"artifact": m.get("artifact"), "parameters": m.get("parameters", {}), "precision": m.get("precision", {})}
            outcome = {"results": m.get("results", {})}
        return {
            "code": dict(m.get("code") or {}),
            "configuration": configuration,
            "data": {i.dataset: {"ref": i.ref.split("@", 1)[0], "manifest_hash": i.manifest_hash, "content_hash": i.content_hash} for i in self.inputs}
            | ({"watermark": m.get("watermark")} if self.kind == ARTIFACT else {}),
            "labels": {i.dataset: i.label for i in self.inputs},
            "seed": m.get("seed"),
            "environment": dict(m.get("environment") or {}),
            "outcome": outcome,
        }


@dataclass(frozen=True)
class Change:
    """One leaf that differs: its section, its dotted name within the section, both values (None: absent)."""

    section: str
    name: str
    a: Any
    b: Any

    def to_document(self) -> dict[str, Any]:
        return {"section": self.section, "name": self.name, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class DataPair:
    """An input both runs read whose realization differs: the two pinned references ``dsv diff`` compares."""

    dataset: str
    a: str | None
    b: str | None

    def to_document(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "a": self.a, "b": self.b}


@dataclass(frozen=True)
class RunDiff:
    """The differences between two runs (``changes`` in section order) and the realization pairs worth diffing next."""

    a: RunSide
    b: RunSide
    changes: tuple[Change, ...]
    data_pairs: tuple[DataPair, ...]

    @property
    def identical(self) -> bool:
        return not self.changes

    def changed_sections(self) -> list[str]:
        return [s for s in SECTIONS if any(c.section == s for c in self.changes)]

    def to_document(self) -> dict[str, Any]:
        return {
            "a": self.a.to_document(),
            "b": self.b.to_document(),
            "identical": self.identical,
            "sections": {s: [c.to_document() for c in self.changes if c.section == s] for s in SECTIONS},
            "realization_diffs": [p.to_document() for p in self.data_pairs],
        }


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """``value`` flattened to ``{dotted name: leaf}``; lists and scalars are leaves, an empty mapping has none (as if absent)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in sorted(value, key=str):
            out |= leaves(value[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix: value}


def _section_changes(section: str, a: Any, b: Any) -> list[Change]:
    left, right = leaves(a), leaves(b)
    names = sorted(left.keys() | right.keys())
    return [Change(section, n, left.get(n, _MISSING), right.get(n, _MISSING)) for n in names if left.get(n, _MISSING) != right.get(n, _MISSING)]


def _pairs(a: Sequence[RunInput], b: Sequence[RunInput]) -> tuple[DataPair, ...]:
    left, right = {i.dataset: i for i in a}, {i.dataset: i for i in b}
    pairs = []
    for dataset in sorted(left.keys() | right.keys()):
        x, y = left.get(dataset), right.get(dataset)
        if x is None or y is None or x.manifest_hash != y.manifest_hash:
            pairs.append(DataPair(dataset, x.pinned_ref if x else None, y.pinned_ref if y else None))
    return tuple(pairs)


def diff_runs(a: RunSide, b: RunSide) -> RunDiff:
    """Compare two runs section by section (a kind that differs is a ``configuration.kind`` change)."""
    left, right = a.sections(), b.sections()
    changes = [Change("configuration", "kind", a.kind, b.kind)] if a.kind != b.kind else []
    for section in SECTIONS:
        changes += _section_changes(section, left[section], right[section])
    ordered = sorted(changes, key=lambda c: SECTIONS.index(c.section))
    return RunDiff(a, b, tuple(ordered), _pairs(a.inputs, b.inputs))


__all__ = ["ARTIFACT", "MODEL_RUN", "SECTIONS", "Change", "DataPair", "RunDiff", "RunInput", "RunSide", "diff_runs", "leaves"]
