"""Declarative contracts: one YAML file per table or dataset.

A contract names the columns, their logical types and parameters, the natural
key, units, and the semantic expectations (core/contracts/semantic.py, docs/contracts.md). From
it the code derives the Arrow schema, the Pandera schema and the canonical
encoding parameters (see docs/canonical-encoding.md).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dsv_platform.core import canonical_json
from dsv_platform.core.config_yaml import StrictLoader
from dsv_platform.core.contracts.owners import owner_problem
from dsv_platform.core.contracts.semantic import SEMANTIC_COLUMN_KEYS, document_of, parse_column_expect, parse_drift, parse_expectations, read_reference
from dsv_platform.core.errors import ContractError

if TYPE_CHECKING:  # imported where used: loading a contract (`dsv resolve`) needs no pyarrow
    import pyarrow as pa


class LogicalType(enum.Enum):
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    BOOL = "bool"
    STRING = "string"
    DECIMAL = "decimal"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    TIMESTAMP = "timestamp"
    DATE = "date"
    BINARY = "binary"

    @property
    def is_integer(self) -> bool:
        return self.value.startswith(("int", "uint"))

    @property
    def is_float(self) -> bool:
        return self in (LogicalType.FLOAT32, LogicalType.FLOAT64)


TIMESTAMP_RESOLUTIONS = ("s", "ms", "us", "ns")

# Keys a column may carry. ``allowed_values`` and ``range`` are enforced by the
# Pandera schema; they, ``drift`` and the semantic keys (core/contracts/semantic.py) are
# rules of the publication gate. None of them enters the schema hash.
COLUMN_KEYS = (
    frozenset({"name", "type", "nullable", "unit", "precision", "scale", "resolution", "description", "allowed_values", "range", "drift", "renamed_from"})
    | {"restricted"}  # a source column only a definition restricting it in its access block may publish (core/privacy/publication_gates.py)
    | SEMANTIC_COLUMN_KEYS
)
CONTRACT_KEYS = frozenset({"name", "key", "columns", "description", "owner", "partition_by", "version", "expectations"})
RANGE_KEYS = frozenset({"min", "max"})


@cache
def _integer_arrow() -> dict[LogicalType, pa.DataType]:
    import pyarrow as pa

    return {
        LogicalType.INT8: pa.int8(),
        LogicalType.INT16: pa.int16(),
        LogicalType.INT32: pa.int32(),
        LogicalType.INT64: pa.int64(),
        LogicalType.UINT8: pa.uint8(),
        LogicalType.UINT16: pa.uint16(),
        LogicalType.UINT32: pa.uint32(),
        LogicalType.UINT64: pa.uint64(),
    }


@dataclass(frozen=True)
class Column:
    """One contract column. ``params`` are the type parameters that enter the schema hash."""

    name: str
    type: LogicalType
    nullable: bool = False
    unit: str | None = None
    precision: int | None = None
    scale: int | None = None
    resolution: str | None = None
    allowed_values: tuple[Any, ...] | None = None
    value_range: tuple[Any, Any] | None = None
    drift: Mapping[str, Any] | None = field(default=None, compare=False)
    description: str | None = field(default=None, compare=False)
    expect: Mapping[str, Any] | None = field(default=None, compare=False)  # the semantic keys, normalized
    renamed_from: str | None = field(default=None, compare=False)  # a declared rename (docs/schema-evolution.md); not hashed
    restricted: bool = field(default=False, compare=False)  # only a definition whose access block restricts it publishes it; not hashed

    @property
    def params(self) -> dict[str, Any]:
        if self.type is LogicalType.DECIMAL:
            return {"precision": self.precision, "scale": self.scale}
        if self.type.is_float:
            return {"scale": self.scale}
        if self.type is LogicalType.TIMESTAMP:
            return {"resolution": self.resolution}
        return {}

    @property
    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        t = self.type
        if t.is_integer:
            return _integer_arrow()[t]
        if t is LogicalType.BOOL:
            return pa.bool_()
        if t is LogicalType.STRING:
            return pa.string()
        if t is LogicalType.DECIMAL:
            assert self.precision is not None and self.scale is not None
            return pa.decimal128(self.precision, self.scale) if self.precision <= 38 else pa.decimal256(self.precision, self.scale)
        if t is LogicalType.FLOAT32:
            return pa.float32()
        if t is LogicalType.FLOAT64:
            return pa.float64()
        if t is LogicalType.TIMESTAMP:
            return pa.timestamp(self.resolution or "us", tz="UTC")
        if t is LogicalType.DATE:
            return pa.date32()
        return pa.binary()

    def schema_entry(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.value, "params": self.params, "nullable": self.nullable, "unit": self.unit}


@dataclass(frozen=True)
class Contract:
    """A parsed, validated contract. Build one with :func:`load_contract` or :func:`parse_contract`."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    partition_by: str | None = None
    owner: str | None = None
    description: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)
    expectations: Mapping[str, Any] | None = field(default=None, compare=False)  # table-level semantic rules

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for col in self.columns:
            if col.name == name:
                return col
        raise ContractError(f"no such column in contract {self.name!r}", file=self.source, column=name)

    @property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        fields = [pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in self.columns]
        return pa.schema(fields, metadata={b"dsv.contract": self.name.encode(), b"dsv.schema_hash": self.schema_hash.encode()})

    def schema_document(self) -> dict[str, Any]:
        """The document whose canonical JSON is hashed into the schema hash."""
        return {"columns": [c.schema_entry() for c in self.columns], "key": list(self.key)}

    @property
    def schema_hash(self) -> str:
        return canonical_json.sha256_hex(self.schema_document())

    def to_document(self) -> dict[str, Any]:
        """A plain mapping that :func:`parse_contract` reads back to an equal contract."""
        cols = []
        for c in self.columns:
            entry: dict[str, Any] = {"name": c.name, "type": c.type.value}
            if c.nullable:
                entry["nullable"] = True
            for attr in ("unit", "precision", "scale", "resolution", "description", "renamed_from"):
                if getattr(c, attr) is not None:
                    entry[attr] = getattr(c, attr)
            if c.allowed_values is not None:
                entry["allowed_values"] = list(c.allowed_values)
            if c.value_range is not None:
                lo, hi = c.value_range
                entry["range"] = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
            if c.drift is not None:
                entry["drift"] = document_of(dict(c.drift))
            if c.restricted:
                entry["restricted"] = True
            entry.update(document_of(dict(c.expect or {})))
            cols.append(entry)
        doc: dict[str, Any] = {"name": self.name, "key": list(self.key), "columns": cols}
        for attr in ("partition_by", "owner", "description"):
            if getattr(self, attr) is not None:
                doc[attr] = getattr(self, attr)
        if self.expectations is not None:
            doc["expectations"] = document_of(dict(self.expectations))
        return doc


def _require_int(raw: Mapping[str, Any], key: str, *, file: str | None, column: str, low: int, high: int) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContractError(f"{key!r} must be an integer from {low} to {high}, got {value!r}", file=file, column=column)
    if not low <= value <= high:
        raise ContractError(f"{key!r} must be from {low} to {high}, got {value}", file=file, column=column)
    return value


def _parse_column(raw: Any, *, file: str | None, index: int) -> Column:
    if not isinstance(raw, Mapping):
        raise ContractError(f"columns[{index}] must be a mapping, got {raw!r}", file=file)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ContractError(f"columns[{index}] needs a non-empty string 'name'", file=file)
    unknown = sorted(set(raw) - COLUMN_KEYS)
    if unknown:
        raise ContractError(f"unknown key(s) {unknown}; allowed: {sorted(COLUMN_KEYS)}", file=file, column=name)
    type_name = raw.get("type")
    try:
        ltype = LogicalType(type_name)
    except ValueError:
        allowed = ", ".join(t.value for t in LogicalType)
        raise ContractError(f"unknown type {type_name!r}; allowed: {allowed}", file=file, column=name) from None
    nullable = raw.get("nullable", False)
    if not isinstance(nullable, bool):
        raise ContractError(f"'nullable' must be true or false, got {nullable!r}", file=file, column=name)
    unit = raw.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise ContractError(f"'unit' must be a string, got {unit!r}", file=file, column=name)
    precision, scale, resolution = _type_params(raw, ltype, file=file, column=name)
    allowed_values, value_range, drift = _semantic_params(raw, file=file, column=name)
    numeric = ltype.is_integer or ltype.is_float or ltype is LogicalType.DECIMAL
    if "allowed_values_ref" in raw:
        if allowed_values is not None:
            raise ContractError("give 'allowed_values' or 'allowed_values_ref', not both", file=file, column=name)
        allowed_values = read_reference(raw["allowed_values_ref"], file=file, column=name, integer=ltype.is_integer)
    drift = parse_drift(drift, file=file, column=name, numeric=numeric) if drift is not None else None
    description = raw.get("description")
    renamed_from = raw.get("renamed_from")
    if renamed_from is not None and (not isinstance(renamed_from, str) or not renamed_from or renamed_from == name):
        raise ContractError(f"'renamed_from' must name the column's previous name, got {renamed_from!r}", file=file, column=name)
    if not isinstance(raw.get("restricted", False), bool):
        raise ContractError(f"'restricted' must be true or false, got {raw['restricted']!r}", file=file, column=name)
    return Column(
        name=name,
        type=ltype,
        nullable=nullable,
        unit=unit,
        precision=precision,
        scale=scale,
        resolution=resolution,
        allowed_values=allowed_values,
        value_range=value_range,
        drift=dict(drift) if drift is not None else None,
        description=description,
        renamed_from=renamed_from,
        restricted=raw.get("restricted", False),
        expect=parse_column_expect(raw, file=file, column=name, numeric=numeric),
    )


def _type_params(raw: Mapping[str, Any], ltype: LogicalType, *, file: str | None, column: str) -> tuple[int | None, int | None, str | None]:
    """``(precision, scale, resolution)`` of a column: each required by its type and refused by the others."""
    name = column
    precision = scale = None
    resolution = None
    if ltype is LogicalType.DECIMAL:
        if "precision" not in raw or "scale" not in raw:
            raise ContractError("a decimal needs both 'precision' and 'scale'", file=file, column=name)
        precision = _require_int(raw, "precision", file=file, column=name, low=1, high=76)
        scale = _require_int(raw, "scale", file=file, column=name, low=0, high=precision)
    elif ltype.is_float:
        if "scale" not in raw:
            raise ContractError("a float needs a 'scale' (fraction digits of its canonical text)", file=file, column=name)
        scale = _require_int(raw, "scale", file=file, column=name, low=0, high=60)
    elif ltype is LogicalType.TIMESTAMP:
        resolution = raw.get("resolution")
        if resolution not in TIMESTAMP_RESOLUTIONS:
            raise ContractError(f"a timestamp needs 'resolution' in {list(TIMESTAMP_RESOLUTIONS)}, got {resolution!r}", file=file, column=name)
    for key in ("precision", "scale", "resolution"):
        if key in raw and ((key in ("precision", "scale") and precision is None and scale is None) or (key == "resolution" and resolution is None)):
            raise ContractError(f"{key!r} does not apply to type {ltype.value}", file=file, column=name)
    return precision, scale, resolution


def _semantic_params(
    raw: Mapping[str, Any], *, file: str | None, column: str
) -> tuple[tuple[Any, ...] | None, tuple[Any, Any] | None, Mapping[str, Any] | None]:
    """``(allowed_values, range, drift)`` of a column, in shape (core/contracts/semantic_rules.py evaluates them)."""
    name = column
    allowed_values = raw.get("allowed_values")
    if allowed_values is not None:
        if not isinstance(allowed_values, list) or not allowed_values:
            raise ContractError("'allowed_values' must be a non-empty list", file=file, column=name)
        allowed_values = tuple(allowed_values)
    value_range = None
    if "range" in raw:
        rng = raw["range"]
        if not isinstance(rng, Mapping) or not rng or set(rng) - RANGE_KEYS:
            raise ContractError(f"'range' must be a mapping with 'min' and/or 'max', got {rng!r}", file=file, column=name)
        value_range = (rng.get("min"), rng.get("max"))
    drift = raw.get("drift")
    if drift is not None and not isinstance(drift, Mapping):
        raise ContractError(f"'drift' must be a mapping, got {drift!r}", file=file, column=name)
    return allowed_values, value_range, drift


def parse_contract(doc: Any, *, source: str | None = None) -> Contract:
    """Validate a contract document (already parsed from YAML or JSON)."""
    if not isinstance(doc, Mapping):
        raise ContractError(f"a contract must be a mapping, got {type(doc).__name__}", file=source)
    unknown = sorted(set(doc) - CONTRACT_KEYS)
    if unknown:
        raise ContractError(f"unknown key(s) {unknown}; allowed: {sorted(CONTRACT_KEYS)}", file=source)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise ContractError("a contract needs a non-empty string 'name'", file=source)
    raw_columns = doc.get("columns")
    if not isinstance(raw_columns, Sequence) or isinstance(raw_columns, str) or not raw_columns:
        raise ContractError("'columns' must be a non-empty list", file=source)
    columns = tuple(_parse_column(raw, file=source, index=i) for i, raw in enumerate(raw_columns))
    seen: set[str] = set()
    for col in columns:
        if col.name in seen:
            raise ContractError("column is declared twice", file=source, column=col.name)
        seen.add(col.name)
    raw_key = doc.get("key")
    if isinstance(raw_key, str):
        raw_key = [raw_key]
    if not isinstance(raw_key, Sequence) or not raw_key or not all(isinstance(k, str) for k in raw_key):
        raise ContractError("'key' must be a non-empty list of column names", file=source)
    for k in raw_key:
        if k not in seen:
            raise ContractError("key column is not declared in 'columns'", file=source, column=k)
        col = next(c for c in columns if c.name == k)
        if col.type.is_float:
            raise ContractError("a float column cannot be part of the natural key", file=source, column=k)
        if col.nullable:
            raise ContractError("a key column cannot be nullable", file=source, column=k)
    if len(set(raw_key)) != len(raw_key):
        raise ContractError(f"'key' names a column twice: {list(raw_key)}", file=source)
    partition_by = doc.get("partition_by")
    if partition_by is not None and partition_by not in seen:
        raise ContractError("partition_by names an undeclared column", file=source, column=str(partition_by))
    owner = doc.get("owner")
    if (problem := owner_problem(owner)) is not None:
        raise ContractError(problem, file=source)
    return Contract(
        name=name,
        columns=columns,
        key=tuple(raw_key),
        partition_by=partition_by,
        owner=owner,
        description=doc.get("description"),
        source=source,
        expectations=parse_expectations(doc.get("expectations"), file=source, columns=[c.name for c in columns], key=raw_key),
    )


def load_contract(path: str | Path) -> Contract:
    """Read and validate a YAML contract file; errors name the file and column."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ContractError(f"cannot read contract: {exc.strerror}", file=str(path)) from exc
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ContractError(f"not UTF-8 text (byte {exc.start}, line {line})", file=str(path)) from exc
    try:
        doc = yaml.load(text, Loader=_ContractLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None)
        duplicate = isinstance(problem, str) and problem.startswith("duplicate key")
        message = str(problem) if duplicate else " ".join(str(exc).split())
        raise ContractError(f"not valid YAML: {message}", file=str(path)) from exc
    return parse_contract(doc, source=str(path))


class _ContractLoader(StrictLoader):
    """Refuses a key given twice (naming it and its line), with YAML 1.1 booleans as before (``nullable: yes`` stays true)."""

    yaml_implicit_resolvers = yaml.SafeLoader.yaml_implicit_resolvers
