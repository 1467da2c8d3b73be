"""Declarative dataset definitions (``dsv_platform/datasets/*.yaml``) parsed into frozen values.

A definition is a governed recipe: which source tables, which features, which
label definition and version, the observation window, the population filter,
the split policy, the output contract and the as-of watermark rule. A
semantic change is a new definition version, i.e. a new file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dsv_platform.core import canonical_json
from dsv_platform.core.contract import Contract, parse_contract
from dsv_platform.core.errors import DsvError
from dsv_platform.core.splits import GROUP_SPLIT, GroupSplitPolicy, HashSplitPolicy, SplitPolicy, policy_from_document

DEFINITIONS_DIR = Path(__file__).resolve().parent.parent / "datasets"
KEYS = frozenset(
    {"name", "version", "description", "owner", "sources", "label", "features", "observation_window", "population_filter", "split_policy", "watermark", "gates", "seed", "contract"}
)
WATERMARK_RULES = ("latest_recorded", "fixed")


class DatasetDefinitionError(DsvError):
    """A dataset definition file is malformed."""


@dataclass(frozen=True)
class ObservationWindow:
    column: str
    start: dt.date
    end: dt.date

    def to_document(self) -> dict[str, str]:
        return {"column": self.column, "start": self.start.isoformat(), "end": self.end.isoformat()}

    def days(self) -> list[dt.date]:
        return [self.start + dt.timedelta(days=i) for i in range((self.end - self.start).days + 1)]


@dataclass(frozen=True)
class PopulationFilter:
    """Keep rows whose ``column`` is one of ``values``."""

    column: str
    values: tuple[str, ...]

    def to_text(self) -> str:
        return f"{self.column} in [{', '.join(self.values)}]"


@dataclass(frozen=True)
class WatermarkRule:
    """``latest_recorded``: everything recorded in the pinned snapshots; ``fixed``: as known at ``at``."""

    rule: str
    at: dt.datetime | None = None

    def to_document(self) -> dict[str, str]:
        return {"rule": self.rule} if self.at is None else {"rule": self.rule, "at": self.at.isoformat()}


@dataclass(frozen=True)
class Gates:
    rows_at_least: int
    label_coverage_at_least_bp: int
    proportion_tolerance_bp: int


@dataclass(frozen=True)
class DatasetDefinition:
    name: str
    version: str
    description: str
    owner: str
    sources: tuple[str, ...]
    label_name: str
    label_version: int
    features: tuple[str, ...]
    observation_window: ObservationWindow
    population_filter: PopulationFilter
    split_policy: Mapping[str, Any]
    watermark: WatermarkRule
    gates: Gates
    seed: int
    contract: Contract
    document: Mapping[str, Any]

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.version}"

    @property
    def asset_prefix(self) -> str:
        return f"{self.name}_{self.version}"

    @property
    def recipe_hash(self) -> str:
        return canonical_json.sha256_hex(self.recipe())

    def policy(self) -> SplitPolicy:
        return policy_from_document(self.split_policy)

    @property
    def entity_column(self) -> str:
        return str(self.split_policy.get("group_column", self.contract.key[0]))

    def recipe(self) -> dict[str, Any]:
        """The recipe registered with the definition (everything but the contract)."""
        return {k: v for k, v in self.document.items() if k != "contract"}


def _need(doc: Mapping[str, Any], key: str, kind: type, source: str) -> Any:
    value = doc.get(key)
    if not isinstance(value, kind):
        raise DatasetDefinitionError(f"{source}: '{key}' must be a {kind.__name__}, got {value!r}")
    return value


def _split_policy(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The policy document; a group split may be written with ``salt`` and ``bounds`` for short."""
    if raw.get("policy") == GROUP_SPLIT and "bounds" in raw:
        doc = GroupSplitPolicy(str(raw["group_column"]), HashSplitPolicy.from_bounds(str(raw["salt"]), str(raw["bounds"]))).to_document()
    else:
        doc = dict(raw)
    try:
        policy_from_document(doc)
    except DsvError as exc:
        raise DatasetDefinitionError(f"{source}: bad split_policy ({exc})") from exc
    return doc


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def parse_definition(raw: Any, *, source: str = "<definition>") -> DatasetDefinition:
    if not isinstance(raw, Mapping):
        raise DatasetDefinitionError(f"{source}: a dataset definition is a mapping")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise DatasetDefinitionError(f"{source}: unknown key(s) {unknown}; known: {sorted(KEYS)}")
    doc = _canonical(raw)
    window = _need(doc, "observation_window", Mapping, source)
    population = _need(doc, "population_filter", Mapping, source)
    label = _need(doc, "label", Mapping, source)
    mark = _need(doc, "watermark", Mapping, source)
    gates = _need(doc, "gates", Mapping, source)
    if mark.get("rule") not in WATERMARK_RULES:
        raise DatasetDefinitionError(f"{source}: watermark.rule must be one of {WATERMARK_RULES}, got {mark.get('rule')!r}")
    if mark["rule"] == "fixed" and "at" not in mark:
        raise DatasetDefinitionError(f"{source}: a fixed watermark needs 'at' (an ISO timestamp with offset)")
    policy = _split_policy(_need(doc, "split_policy", Mapping, source), source)
    doc["split_policy"] = policy
    try:
        contract = parse_contract(doc["contract"], source=source)
    except KeyError as exc:
        raise DatasetDefinitionError(f"{source}: 'contract' is required") from exc
    return DatasetDefinition(
        name=_need(doc, "name", str, source),
        version=_need(doc, "version", str, source),
        description=str(doc.get("description", "")),
        owner=str(doc.get("owner", "unknown")),
        sources=tuple(_need(doc, "sources", list, source)),
        label_name=str(label["name"]),
        label_version=int(label["version"]),
        features=tuple(_need(doc, "features", list, source)),
        observation_window=ObservationWindow(str(window["column"]), dt.date.fromisoformat(window["start"]), dt.date.fromisoformat(window["end"])),
        population_filter=PopulationFilter(str(population["column"]), tuple(str(v) for v in population["in"])),
        split_policy=policy,
        watermark=WatermarkRule(mark["rule"], dt.datetime.fromisoformat(mark["at"]) if mark.get("at") else None),
        gates=Gates(int(gates["rows_at_least"]), int(gates["label_coverage_at_least_bp"]), int(gates["proportion_tolerance_bp"])),
        seed=int(_need(doc, "seed", int, source)),
        contract=contract,
        document=doc,
    )


def load_definition(path: str | Path) -> DatasetDefinition:
    path = Path(path)
    with path.open(encoding="utf-8") as f:
        return parse_definition(yaml.safe_load(f), source=str(path))


def load_definitions(folder: Path = DEFINITIONS_DIR) -> list[DatasetDefinition]:
    """Every ``*.yaml`` definition in ``folder``, sorted by name and version."""
    found = [load_definition(p) for p in sorted(folder.glob("*.yaml"))]
    return sorted(found, key=lambda d: (d.name, d.version))
