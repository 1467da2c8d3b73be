"""A landed source as configuration: its contract, valid time, entity, compatibility view and landing format.

:class:`SourceSpec` is the generic replacement of the fraud ``TableSpec``: the
same ``name``, ``contract``, ``valid_time``, ``aliases`` and ``partition_by``,
plus the entity (subject) column and how batches arrive. A source file
(``sources/<name>.yaml``) is a contract in today's shape plus the keys in
:data:`SOURCE_KEYS`; see docs/ for the full shape.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, Protocol, cast

from dsv_platform.core.config.dataset_record import parse_contract_version
from dsv_platform.core.config_yaml import ConfigError, check_keys, need
from dsv_platform.core.contracts.contract import CONTRACT_KEYS, Contract, LogicalType, parse_contract
from dsv_platform.core.errors import ContractError

LandingFormat = Literal["parquet", "csv", "jsonl"]
LANDING_FORMATS: tuple[LandingFormat, ...] = ("parquet", "csv", "jsonl")
SOURCE_KEYS = frozenset({"landing", "valid_time", "entity", "aliases", "writers", "approved_refs"})
LANDING_KEYS = frozenset({"format", "null_values"})
DEFAULT_NULL_VALUES: tuple[str, ...] = ("",)
"""A CSV cell is null only when it is empty and unquoted; ``NA``, ``N/A``, ``null`` and ``NULL`` are text (docs/configuration.md)."""
TIME_TYPES = (LogicalType.TIMESTAMP, LogicalType.DATE)
UNPARTITIONED_DAY = dt.date.min
"""The one landing-index day of every batch of a source without ``partition_by`` (a reference table: one partition ``all``)."""


def partition_text(day: dt.date) -> str:
    """A landing-index day as shown: ISO, or ``all`` for :data:`UNPARTITIONED_DAY` (a reference table's one partition)."""
    return "all" if day == UNPARTITIONED_DAY else day.isoformat()


VALID_TIME_NEEDED = (
    "is required for a partitioned source: the date or timestamp column from which a row is valid (a reference table, "
    "a source without partition_by, may omit it: its rows are valid at any time; docs/configuration.md)"
)


class TableSpecLike(Protocol):
    """What a canonical table needs: its name and contract (a :class:`SourceSpec`, a :class:`DerivedTableSpec`)."""

    @property
    def name(self) -> str: ...

    @property
    def contract(self) -> Contract: ...


@dataclass(frozen=True)
class DerivedTableSpec:
    """A canonical table computed by the platform rather than landed (a label version's ``labels_<name>_v<n>``)."""

    name: str
    contract: Contract


@dataclass(frozen=True)
class SourceSpec:
    """A canonical table fed by a landed source.

    ``aliases`` is the compatibility view over a source's renamed columns:
    ``{name the source sends now: contract column name}``.
    """

    name: str
    contract: Contract
    valid_time: str | None  # None: a reference table's rows are valid at any time (a join on it is a lookup of the latest version)
    entity: str | None = None
    aliases: Mapping[str, str] = field(default_factory=dict, hash=False)
    landing_format: LandingFormat = "csv"
    null_values: tuple[str, ...] = DEFAULT_NULL_VALUES
    """The unquoted CSV cells read as null (``landing.null_values``); every other cell, a quoted one included, is its text."""
    source_file: Path | None = field(default=None, compare=False)
    writers: tuple[str, ...] = ()  # identities expected to land its batches (integrity signal unexpected_writer; empty: not checked)
    approved_refs: tuple[str, ...] = ()  # branches/tags a pinned snapshot must descend from (signal unapproved_snapshot)
    version: int | None = field(default=None, compare=False)  # the contract's declared version: feature ``name:vN`` of a manifest

    def __post_init__(self) -> None:
        object.__setattr__(self, "aliases", MappingProxyType(dict(self.aliases)))
        problem = spec_problem(self)
        if problem is not None:
            key, message = problem
            raise ConfigError(message, file=self.source_file or f"source {self.name}", key=key)

    @property
    def partition_by(self) -> str | None:
        """The contract's partition column; None for a reference table (one partition ``all``, loaded whole per batch)."""
        return self.contract.partition_by

    @property
    def partitioned(self) -> bool:
        return self.contract.partition_by is not None

    @property
    def contract_file(self) -> str:
        """The contract's name (``TableSpec.contract_file`` compatibility)."""
        return self.contract.name


def spec_problem(spec: SourceSpec) -> tuple[str, str] | None:
    """``(key, message)`` of the first thing wrong with ``spec``, or None."""
    columns = set(spec.contract.column_names)
    if spec.landing_format not in LANDING_FORMATS:
        return "landing.format", f"must be one of {list(LANDING_FORMATS)}, got {spec.landing_format!r}"
    if spec.valid_time is None and spec.contract.partition_by is not None:
        return "valid_time", VALID_TIME_NEEDED
    if spec.valid_time is not None and spec.valid_time not in columns:
        return "valid_time", f"{spec.valid_time!r} is not a column of the contract"
    if spec.valid_time is not None and spec.contract.column(spec.valid_time).type not in TIME_TYPES:
        return "valid_time", f"{spec.valid_time!r} must be a timestamp or date column"
    if spec.entity is not None and spec.entity not in columns:
        return "entity", f"{spec.entity!r} is not a column of the contract"
    for sent, target in spec.aliases.items():
        if target not in columns:
            return f"aliases.{sent}", f"{target!r} is not a column of the contract"
        if sent in columns:
            return f"aliases.{sent}", f"{sent!r} is itself a contract column"
    return None


def _aliases(doc: Mapping[str, Any], file: Path) -> dict[str, str]:
    raw = doc.get("aliases", {})
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping {{sent name: contract column}}, got {raw!r}", file=file, key="aliases")
    for sent, target in raw.items():
        if not isinstance(sent, str) or not isinstance(target, str):
            raise ConfigError("names must be strings", file=file, key=f"aliases.{sent}")
    return dict(raw)


def _names(doc: Mapping[str, Any], key: str, file: Path) -> tuple[str, ...]:
    raw = doc.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        raise ConfigError(f"must be a list of names, got {raw!r}", file=file, key=key)
    return tuple(raw)


def contract_of(doc: Mapping[str, Any], file: Path, *, where: str | None = None) -> Contract:
    """Parse a contract document; a ContractError becomes a one-line ConfigError naming the file and key."""
    try:
        return parse_contract(doc, source=str(file))
    except ContractError as exc:
        message = str(exc).removeprefix(f"{file}: ")
        prefix = f"{where}." if where else ""
        key = f"{prefix}columns.{exc.column}" if exc.column else (where or "contract")
        raise ConfigError(message, file=file, key=key) from exc


def _null_values(landing: Mapping[str, Any], fmt: str, file: Path) -> tuple[str, ...]:
    """``landing.null_values``: the CSV cells that mean null (a list of strings, ``[]`` for none); default ``[""]``."""
    if "null_values" not in landing:
        return DEFAULT_NULL_VALUES
    if fmt != "csv":
        raise ConfigError(f"applies to csv landings only ({fmt} has typed nulls)", file=file, key="landing.null_values")
    value = landing["null_values"]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'must be a list of strings (cells read as null), e.g. [""] or ["", "NULL"]; got {value!r}', file=file, key="landing.null_values")
    return tuple(dict.fromkeys(value))


def parse_source(doc: Any, *, file: Path) -> SourceSpec:
    """A :class:`SourceSpec` from a ``sources/<name>.yaml`` document (the file stem must be the name)."""
    doc = check_keys(doc, file=file, where=None, allowed=CONTRACT_KEYS | SOURCE_KEYS, required=("name", "landing"))
    contract = contract_of({k: v for k, v in doc.items() if k in CONTRACT_KEYS}, file)
    if contract.name != file.stem:
        raise ConfigError(f"the file of source {contract.name!r} must be named {contract.name}.yaml", file=file, key="name")
    landing = check_keys(doc["landing"], file=file, where="landing", allowed=LANDING_KEYS, required=("format",))
    fmt = need(landing, "format", str, file=file, where="landing")
    if fmt not in LANDING_FORMATS:
        raise ConfigError(f"must be one of {list(LANDING_FORMATS)}, got {fmt!r}", file=file, key="landing.format")
    entity = need(doc, "entity", str, file=file) if "entity" in doc else None
    null_values = _null_values(landing, fmt, file)
    return SourceSpec(
        name=contract.name,
        contract=contract,
        valid_time=need(doc, "valid_time", str, file=file) if "valid_time" in doc else None,
        entity=entity,
        aliases=_aliases(doc, file),
        landing_format=cast(LandingFormat, fmt),
        null_values=null_values,
        source_file=file,
        writers=_names(doc, "writers", file),
        approved_refs=_names(doc, "approved_refs", file),
        version=parse_contract_version(doc.get("version"), file=file),
    )
