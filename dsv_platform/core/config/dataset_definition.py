"""Declarative dataset definitions (``datasets/<name>_<version>.yaml``) parsed into frozen values.

A definition is a governed recipe; a semantic change is a new definition version, i.e. a
new file. Cross-checks against the sources live in :mod:`dsv_platform.core.config.platform_config`
(details: docs/lineage-and-reproduction.md).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.config.aggregation import (
    Aggregation,
    Derived,
    check_zone,
    parse_aggregate,
    parse_derive,
    transform_inputs,
    transform_outputs,
    transform_zones,
)
from dsv_platform.core.config.dataset_record import parse_purpose, parse_retention_until
from dsv_platform.core.config.expected_partitions import ExpectedPartitions, parse_expected_partitions
from dsv_platform.core.config.slo import Slo, parse_slo
from dsv_platform.core.config.source import contract_of
from dsv_platform.core.config.split_policy import parse_split_policy
from dsv_platform.core.config_yaml import ConfigError, check_keys, names_list, need, read_yaml
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.contracts.integrity_signals import parse_integrity
from dsv_platform.core.contracts.owners import owner_of
from dsv_platform.core.identity.example_id import example_id_column
from dsv_platform.core.splits.policy import SplitPolicy, policy_from_document
from dsv_platform.core.trust.access import parse_access

EXAMPLE_DEFINITIONS_DIR = Path(__file__).resolve().parents[2] / "examples" / "fraud" / "config" / "datasets"
KEYS = frozenset(
    {
        "name", "version", "description", "owner", "base", "as_of_joins", "label", "features", "observation_window", "population_filter",
        "split_policy", "watermark", "gates", "seed", "contract", "derive", "aggregate", "integrity", "access", "fan_out", "slo",
        "purpose", "retention_until",
    }
)
LEGACY_KEYS = frozenset({"sources"})
REQUIRED = ("name", "version", "observation_window", "watermark", "gates", "seed", "contract")
JOIN_KEYS = frozenset({"source", "on", "time", "lag", "max_age", "as_known_at"})
KNOWN_AT = ("example_time",)  # as_known_at: the recorded-time cutoff of a bitemporal join
GATE_KEYS = frozenset({"rows_at_least", "label_coverage_at_least_bp", "proportion_tolerance_bp", "expected_partitions"})
DEFAULT_PROPORTION_TOLERANCE_BP = 1000
MAX_FAN_OUT = 256
WATERMARK_RULES = ("latest_recorded", "fixed")
_DURATION = re.compile(r"^(?P<n>\d+)(?P<unit>[dhms])\Z")
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


class DatasetDefinitionError(ConfigError):
    """A dataset definition file is malformed."""


@dataclass(frozen=True)
class ObservationWindow:
    """Days ``start`` to ``end`` inclusive of ``column``: UTC days, or local days of ``timezone`` when given."""

    column: str
    start: dt.date
    end: dt.date
    timezone: str | None = None

    def to_document(self) -> dict[str, str]:
        doc = {"column": self.column, "start": self.start.isoformat(), "end": self.end.isoformat()}
        return doc if self.timezone is None else {**doc, "timezone": self.timezone}

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
    """``label_coverage_at_least_bp`` is 0 (always met) for a dataset without a label."""

    rows_at_least: int
    label_coverage_at_least_bp: int
    proportion_tolerance_bp: int
    expected_partitions: ExpectedPartitions | None = None  # core/config/expected_partitions.py


@dataclass(frozen=True)
class AsOfJoin:
    """Per base row, the ``source`` row of the same ``on`` entity with the latest valid time <= ``time`` - ``lag``.

    ``max_age`` (optional) also requires that valid time >= ``time`` - ``lag`` - ``max_age``
    (``max_age: 0d`` with ``lag: 1d`` is an exact previous-day join). ``known_at``: see docs/configuration.md.
    """

    source: str
    on: tuple[str, ...]
    time: str | None  # None only for a source without valid_time (a reference table: a lookup by ``on``)
    lag: dt.timedelta
    max_age: dt.timedelta | None = None
    known_at: str | None = None  # "example_time": only versions recorded at or before time - lag


@dataclass(frozen=True)
class LabelRef:
    name: str
    version: int


@dataclass(frozen=True)
class DatasetDefinition:
    name: str
    version: str
    description: str
    owner: str
    base: str
    as_of_joins: tuple[AsOfJoin, ...]
    label: LabelRef | None
    features: tuple[str, ...]
    observation_window: ObservationWindow
    population_filter: PopulationFilter | None
    split_policy: Mapping[str, Any] | None
    watermark: WatermarkRule
    gates: Gates
    seed: int
    contract: Contract
    document: Mapping[str, Any]
    legacy_sources: tuple[str, ...] = ()
    derive: tuple[Derived, ...] = ()
    aggregate: Aggregation | None = None
    fan_out: int = 1  # parallel prepare steps of a build: how it runs, not what the data is (not in the recipe)
    slo: Slo | None = None  # service levels (core/config/slo.py), not in the recipe
    purpose: str | None = None  # what it is for (core/config/dataset_record.py); in the recipe when declared
    retention_until: dt.datetime | None = None  # GC keeps its realizations until then; not in the recipe

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.version}"

    @property
    def asset_prefix(self) -> str:
        return f"{self.name}_{self.version}"

    @property
    def sources(self) -> tuple[str, ...]:
        """The base source, then every joined source (each once)."""
        if self.legacy_sources:
            return self.legacy_sources
        return tuple(dict.fromkeys([self.base, *(j.source for j in self.as_of_joins)]))

    @property
    def label_name(self) -> str | None:
        return None if self.label is None else self.label.name

    @property
    def label_version(self) -> int | None:
        return None if self.label is None else self.label.version

    @property
    def recipe_hash(self) -> str:
        return canonical_json.sha256_hex(self.recipe())

    def policy(self) -> SplitPolicy:
        if self.split_policy is None:
            raise DatasetDefinitionError(f"{self.ref} has no split policy", file=str(self.contract.source or self.ref), key="split_policy")
        return policy_from_document(self.split_policy)

    @property
    def entity_column(self) -> str:
        """The column no value of which may appear in two splits: the policy's grouping column, else the example id
        (a composite key's is ``example_id``, see core/identity/example_id.py)."""
        grouped = self.policy().grouped_by if self.split_policy is not None else None
        return grouped or example_id_column(self.contract)

    @property
    def zones(self) -> tuple[str, ...]:
        """The time zones the recipe uses (observation window, time bucket), sorted."""
        return transform_zones(self.observation_window.timezone, self.aggregate)

    @property
    def transform_inputs(self) -> tuple[str, ...]:
        return transform_inputs(self.derive, self.aggregate)

    @property
    def transform_outputs(self) -> tuple[str, ...]:
        return transform_outputs(self.derive, self.aggregate)

    def recipe(self) -> dict[str, Any]:
        """The recipe registered with the definition (everything but the contract)."""
        return {k: v for k, v in self.document.items() if k not in ("contract", "access", "fan_out", "slo", "retention_until")}  # who reads, how, promises


def parse_duration(text: Any, *, file: str | Path, key: str) -> dt.timedelta:
    """``"1d"``, ``"0d"``, ``"6h"``, ``"30m"``, ``"10s"`` as a non-negative timedelta."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    if m is None:
        raise DatasetDefinitionError(f"must be a duration like '1d', '6h', '30m' or '0d', got {text!r}", file=file, key=key)
    return dt.timedelta(**{_UNITS[m["unit"]]: int(m["n"])})


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def _date(doc: Mapping[str, Any], key: str, file: str | Path, where: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(need(doc, key, str, file=file, where=where)))
    except ValueError as exc:
        raise DatasetDefinitionError(f"must be an ISO date, got {doc[key]!r}", file=file, key=f"{where}.{key}") from exc


def _window(doc: Mapping[str, Any], file: str | Path) -> ObservationWindow:
    allowed = {"column", "start", "end", "timezone"}
    raw = check_keys(doc["observation_window"], file=file, where="observation_window", allowed=allowed, required={"column", "start", "end"})
    window = ObservationWindow(
        need(raw, "column", str, file=file, where="observation_window"),
        _date(raw, "start", file, "observation_window"),
        _date(raw, "end", file, "observation_window"),
        check_zone(need(raw, "timezone", str, file=file, where="observation_window"), file=file, key="observation_window.timezone")
        if "timezone" in raw
        else None,
    )
    if window.end < window.start:
        raise DatasetDefinitionError("must not be before start", file=file, key="observation_window.end")
    return window


def _population(doc: Mapping[str, Any], file: str | Path) -> PopulationFilter | None:
    if "population_filter" not in doc:
        return None
    raw = check_keys(doc["population_filter"], file=file, where="population_filter", allowed={"column", "in"}, required={"column", "in"})
    values = need(raw, "in", list, file=file, where="population_filter")
    if not values:
        raise DatasetDefinitionError("must list at least one value", file=file, key="population_filter.in")
    return PopulationFilter(need(raw, "column", str, file=file, where="population_filter"), tuple(str(v) for v in values))


def _watermark(doc: Mapping[str, Any], file: str | Path) -> WatermarkRule:
    mark = check_keys(doc["watermark"], file=file, where="watermark", allowed={"rule", "at"}, required={"rule"})
    if mark["rule"] not in WATERMARK_RULES:
        raise DatasetDefinitionError(f"must be one of {WATERMARK_RULES}, got {mark['rule']!r}", file=file, key="watermark.rule")
    if mark["rule"] == "fixed" and "at" not in mark:
        raise DatasetDefinitionError("a fixed watermark needs 'at' (an ISO timestamp with offset)", file=file, key="watermark.at")
    if "at" not in mark:
        return WatermarkRule(mark["rule"])
    try:
        return WatermarkRule(mark["rule"], dt.datetime.fromisoformat(str(mark["at"])))
    except ValueError as exc:
        raise DatasetDefinitionError(f"must be an ISO timestamp, got {mark['at']!r}", file=file, key="watermark.at") from exc


def _label(doc: Mapping[str, Any], file: str | Path) -> LabelRef | None:
    if "label" not in doc:
        return None
    raw = check_keys(doc["label"], file=file, where="label", allowed={"name", "version"}, required={"name", "version"})
    return LabelRef(need(raw, "name", str, file=file, where="label"), need(raw, "version", int, file=file, where="label"))


def _gates(doc: Mapping[str, Any], file: str | Path, *, labelled: bool, window: ObservationWindow, contract: Contract) -> Gates:
    raw = check_keys(
        doc["gates"], file=file, where="gates", allowed=GATE_KEYS, required={"rows_at_least", *(["label_coverage_at_least_bp"] if labelled else [])}
    )
    if "label_coverage_at_least_bp" in raw and not labelled:
        raise DatasetDefinitionError("applies only to a dataset with a label", file=file, key="gates.label_coverage_at_least_bp")
    value = {k: need(raw, k, int, file=file, where="gates") for k in raw if k != "expected_partitions"}
    days = raw.get("expected_partitions")
    expected = None if days is None else parse_expected_partitions(days, file=file, window=window.days(), column=window.column, contract=contract)
    tolerance = value.get("proportion_tolerance_bp", DEFAULT_PROPORTION_TOLERANCE_BP)
    return Gates(value["rows_at_least"], value.get("label_coverage_at_least_bp", 0), tolerance, expected)


def _joins(doc: Mapping[str, Any], file: str | Path) -> tuple[AsOfJoin, ...]:
    raw = doc.get("as_of_joins", [])
    if not isinstance(raw, list):
        raise DatasetDefinitionError(f"must be a list of joins, got {raw!r}", file=file, key="as_of_joins")
    out = []
    for i, item in enumerate(raw):
        where = f"as_of_joins[{i}]"
        join = check_keys(item, file=file, where=where, allowed=JOIN_KEYS, required={"source", "on"})  # time: checked against the source
        max_age = parse_duration(join["max_age"], file=file, key=f"{where}.max_age") if "max_age" in join else None
        if (known_at := join.get("as_known_at")) not in (None, *KNOWN_AT):
            raise DatasetDefinitionError(f"must be one of {KNOWN_AT}, got {known_at!r}", file=file, key=f"{where}.as_known_at")
        out.append(
            AsOfJoin(
                source=need(join, "source", str, file=file, where=where),
                on=names_list(join, "on", file=file, where=where),
                time=need(join, "time", str, file=file, where=where) if "time" in join else None,
                lag=parse_duration(join.get("lag", "0d"), file=file, key=f"{where}.lag"),
                max_age=max_age,
                known_at=known_at,
            )
        )
    return tuple(out)


def _base(doc: Mapping[str, Any], file: str | Path) -> tuple[str, tuple[str, ...]]:
    """``(base, legacy sources)``: a legacy recipe names ``sources`` and its first one is the base."""
    if "sources" in doc:
        if "base" in doc or "as_of_joins" in doc:
            raise DatasetDefinitionError("'sources' is the legacy form; use 'base' and 'as_of_joins'", file=file, key="sources")
        legacy = names_list(doc, "sources", file=file)
        return legacy[0], legacy
    return need(doc, "base", str, file=file), ()


def parse_definition(raw: Any, *, source: str | Path = "<definition>") -> DatasetDefinition:
    """A definition from its document; ``source`` names the file in errors."""
    file = source
    check_keys(raw, file=file, where=None, allowed=KEYS | LEGACY_KEYS, required=REQUIRED)
    doc = _canonical(raw)
    parse_integrity(doc.get("integrity"), file=file)  # its columns are checked against the contract at build
    if "access" in doc:  # who may read (core/trust/access.py); its columns are checked against the contract at read
        parse_access(doc["access"], file=file)
    base, legacy = _base(doc, file)
    label = _label(doc, file)
    features = names_list(doc, "features", file=file) if "features" in doc else ()
    contract_doc = check_keys(doc["contract"], file=file, where="contract", allowed=set(doc["contract"]) if isinstance(doc["contract"], Mapping) else ())
    contract = contract_of(contract_doc, Path(str(file)), where="contract")
    if "split_policy" in doc:  # the registered policy's document, checked against the output contract (core/config/split_policy.py)
        doc["split_policy"] = parse_split_policy(doc["split_policy"], contract, file=file)
    return DatasetDefinition(
        name=need(doc, "name", str, file=file),
        version=need(doc, "version", str, file=file),
        description=str(doc.get("description", "")),
        owner=owner_of(doc, file),
        base=base,
        as_of_joins=_joins(doc, file),
        label=label,
        features=features,
        observation_window=(window := _window(doc, file)),
        population_filter=_population(doc, file),
        split_policy=doc.get("split_policy"),
        watermark=_watermark(doc, file),
        gates=_gates(doc, file, labelled=label is not None, window=window, contract=contract),
        seed=need(doc, "seed", int, file=file),
        contract=contract,
        document=doc,
        legacy_sources=legacy,
        derive=parse_derive(doc, file),
        aggregate=parse_aggregate(doc, file),
        fan_out=_fan_out(doc, file),
        slo=parse_slo(doc.get("slo"), file=file, duration=parse_duration),
        purpose=parse_purpose(doc.get("purpose"), file=file),
        retention_until=parse_retention_until(doc.get("retention_until"), file=file),
    )


def _fan_out(doc: Mapping[str, Any], file: str | Path) -> int:
    value = doc.get("fan_out", 1)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FAN_OUT:
        raise DatasetDefinitionError(f"must be a whole number of parallel prepare steps from 1 to {MAX_FAN_OUT}, got {value!r}", file=file, key="fan_out")
    return value


def load_definition(path: str | Path) -> DatasetDefinition:
    """Read one definition file (strict YAML: duplicate keys and non-UTF-8 text are errors)."""
    path = Path(path)
    return parse_definition(read_yaml(path), source=path)


def load_definitions(folder: Path | None = None) -> list[DatasetDefinition]:
    """Every ``*.yaml`` definition in ``folder`` (default: the packaged fraud example), sorted by name and version."""
    found = [load_definition(p) for p in sorted((folder or EXAMPLE_DEFINITIONS_DIR).glob("*.yaml"))]
    return sorted(found, key=lambda d: (d.name, d.version))
