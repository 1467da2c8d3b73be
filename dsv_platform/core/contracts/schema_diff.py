"""Schema evolution, classified: every change between two contracts, and who it breaks.

Pure: two :class:`Contract` values (and the registered consumers' columns) in, a
:class:`SchemaDiff` out. A column keeps its identity across a rename declared with
``renamed_from``. The rules (what widens, what narrows, what breaks) are in
docs/schema-evolution.md.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.errors import ContractError, FailureKind
from dsv_platform.core.publication.records import DefinitionConflictError

COMPATIBLE = "compatible"
BREAKING = "breaking"


class ChangeKind(str, enum.Enum):
    ADDITIVE = "additive"
    WIDENING = "widening"
    NARROWING = "narrowing"
    RENAME = "rename"
    TYPE_CHANGE = "type_change"
    UNIT_CHANGE = "unit_change"
    NULLABILITY = "nullability"
    SEMANTIC = "semantic"
    KEY_CHANGE = "key_change"
    REMOVAL = "removal"


@dataclass(frozen=True)
class Change:
    """One change. ``column`` is the column's name in the old contract (the new name for an added column; None for the key)."""

    column: str | None
    kind: ChangeKind
    old: Any
    new: Any
    breaking: bool

    def to_document(self) -> dict[str, Any]:
        return {"column": self.column, "kind": self.kind.value, "old": self.old, "new": self.new, "breaking": self.breaking}

    def describe(self) -> str:
        where = self.column if self.column is not None else "(key)"
        return f"{where}: {self.kind.value} {_text(self.old)} -> {_text(self.new)}{' (breaking)' if self.breaking else ''}"


@dataclass(frozen=True)
class Consumer:
    """A registered reader of a definition and the columns it reads."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ConsumerVerdict:
    name: str
    columns: tuple[str, ...]
    broken_by: tuple[Change, ...] = ()

    @property
    def verdict(self) -> str:
        return BREAKING if self.broken_by else COMPATIBLE

    def to_document(self) -> dict[str, Any]:
        return {"name": self.name, "verdict": self.verdict, "columns": list(self.columns)}


@dataclass(frozen=True)
class SchemaDiff:
    changes: tuple[Change, ...]
    consumers: tuple[ConsumerVerdict, ...] = field(default=())

    @property
    def verdict(self) -> str:
        return BREAKING if any(c.breaking for c in self.changes) else COMPATIBLE

    def to_document(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "changes": [c.to_document() for c in self.changes], "consumers": [c.to_document() for c in self.consumers]}


class ConsumerBreakError(DefinitionConflictError):
    """A definition version changed in a way that breaks a registered consumer: publish a new definition version."""

    kind = FailureKind.CONSUMER_BROKEN


# ---------------------------------------------------------------- types

_SIGNED = {LogicalType.INT8: 8, LogicalType.INT16: 16, LogicalType.INT32: 32, LogicalType.INT64: 64}
_UNSIGNED = {LogicalType.UINT8: 8, LogicalType.UINT16: 16, LogicalType.UINT32: 32, LogicalType.UINT64: 64}
_FLOAT_BITS = {LogicalType.FLOAT32: 32, LogicalType.FLOAT64: 64}
_RESOLUTION = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def type_text(col: Column) -> str:
    """``int32``, ``decimal(18,2)``, ``float64(scale 4)``, ``timestamp[us]``."""
    t = col.type
    if t is LogicalType.DECIMAL:
        return f"decimal({col.precision},{col.scale})"
    if t.is_float:
        return f"{t.value}(scale {col.scale})"
    if t is LogicalType.TIMESTAMP:
        return f"timestamp[{col.resolution}]"
    return str(t.value)


def _integer_kind(old: LogicalType, new: LogicalType) -> ChangeKind:
    if old in _SIGNED and new in _SIGNED:
        return ChangeKind.WIDENING if _SIGNED[new] > _SIGNED[old] else ChangeKind.NARROWING
    if old in _UNSIGNED and new in _UNSIGNED:
        return ChangeKind.WIDENING if _UNSIGNED[new] > _UNSIGNED[old] else ChangeKind.NARROWING
    if old in _UNSIGNED:  # unsigned -> signed: every value fits only in more bits
        return ChangeKind.WIDENING if _SIGNED[new] > _UNSIGNED[old] else ChangeKind.NARROWING
    return ChangeKind.NARROWING  # signed -> unsigned: the negative values no longer fit


def type_change_kind(old: Column, new: Column) -> ChangeKind | None:
    """WIDENING when every old value is exactly representable in the new type, NARROWING when some are not
    (same family), TYPE_CHANGE across families; None when type and parameters are equal."""
    if old.type is new.type and old.params == new.params:
        return None
    o, n = old.type, new.type
    if o.is_integer and n.is_integer:
        return _integer_kind(o, n)
    if o.is_float and n.is_float:
        wider = _FLOAT_BITS[n] >= _FLOAT_BITS[o] and (new.scale or 0) >= (old.scale or 0)
        return ChangeKind.WIDENING if wider else ChangeKind.NARROWING
    if o is n is LogicalType.DECIMAL:
        assert old.precision is not None and old.scale is not None and new.precision is not None and new.scale is not None
        wider = new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
        return ChangeKind.WIDENING if wider else ChangeKind.NARROWING
    if o is n is LogicalType.TIMESTAMP:
        finer = _RESOLUTION[new.resolution or "us"] > _RESOLUTION[old.resolution or "us"]
        # nanoseconds in int64 span only 1677..2262: a move to ns can lose instants, so it narrows
        return ChangeKind.WIDENING if finer and new.resolution != "ns" else ChangeKind.NARROWING
    return ChangeKind.TYPE_CHANGE


# ---------------------------------------------------------------- semantic keys


def _allowed_values_loosened(old: tuple[Any, ...] | None, new: tuple[Any, ...] | None) -> bool | None:
    """None: no change; True: readers may now see values they never saw (breaking); False: tightened."""
    if (None if old is None else set(map(repr, old))) == (None if new is None else set(map(repr, new))):
        return None
    if new is None:
        return True
    if old is None:
        return False
    return not set(map(repr, new)) <= set(map(repr, old))


def _range_loosened(old: tuple[Any, Any] | None, new: tuple[Any, Any] | None) -> bool | None:
    if old == new:
        return None
    if new is None:
        return True
    if old is None:
        return False
    try:
        lower = old[0] is not None and (new[0] is None or new[0] < old[0])
        upper = old[1] is not None and (new[1] is None or new[1] > old[1])
    except TypeError:  # bounds of different kinds cannot be compared: assume the worst
        return True
    return lower or upper


def _range_doc(value: tuple[Any, Any] | None) -> dict[str, Any] | None:
    return None if value is None else {k: v for k, v in (("min", value[0]), ("max", value[1])) if v is not None}


def _column_changes(old: Column, new: Column) -> list[Change]:
    """Every change of one column that kept its identity (same name or a declared rename)."""
    name = old.name
    out: list[Change] = []
    if new.name != old.name:
        out.append(Change(name, ChangeKind.RENAME, old.name, new.name, True))
    kind = type_change_kind(old, new)
    if kind is not None:
        out.append(Change(name, kind, type_text(old), type_text(new), kind is not ChangeKind.WIDENING))
    if old.nullable != new.nullable:
        out.append(Change(name, ChangeKind.NULLABILITY, "nullable" if old.nullable else "required", "nullable" if new.nullable else "required", new.nullable))
    if old.unit != new.unit:
        out.append(Change(name, ChangeKind.UNIT_CHANGE, old.unit, new.unit, True))
    loosened = _allowed_values_loosened(old.allowed_values, new.allowed_values)
    if loosened is not None:
        av = (None if old.allowed_values is None else list(old.allowed_values), None if new.allowed_values is None else list(new.allowed_values))
        out.append(Change(name, ChangeKind.SEMANTIC, {"allowed_values": av[0]}, {"allowed_values": av[1]}, loosened))
    loosened = _range_loosened(old.value_range, new.value_range)
    if loosened is not None:
        out.append(Change(name, ChangeKind.SEMANTIC, {"range": _range_doc(old.value_range)}, {"range": _range_doc(new.value_range)}, loosened))
    if (old.description or None) != (new.description or None):
        out.append(Change(name, ChangeKind.SEMANTIC, {"description": old.description}, {"description": new.description}, False))
    return out


# ---------------------------------------------------------------- the diff


def _identity(old: Contract, new: Contract) -> dict[str, Column]:
    """New column name -> the old column it continues (same name, else its declared ``renamed_from``)."""
    old_by_name = {c.name: c for c in old.columns}
    new_names = set(new.column_names)
    matched: dict[str, Column] = {}
    claimed: dict[str, str] = {}
    for col in new.columns:
        if col.name in old_by_name:  # same name: a stale renamed_from of an earlier version does not matter
            matched[col.name] = old_by_name[col.name]
            continue
        if col.renamed_from is None:
            continue
        previous = col.renamed_from
        if previous in new_names:
            raise ContractError(f"'renamed_from: {previous}' names a column this contract still declares", file=new.source, column=col.name)
        if previous not in old_by_name:
            raise ContractError(f"'renamed_from: {previous}' names no column of {old.source or old.name}", file=new.source, column=col.name)
        if previous in claimed:
            raise ContractError(f"'renamed_from: {previous}' is also declared by column {claimed[previous]!r}", file=new.source, column=col.name)
        claimed[previous] = col.name
        matched[col.name] = old_by_name[previous]
    return matched


def diff_contracts(old: Contract, new: Contract, consumers: Iterable[Consumer] = ()) -> SchemaDiff:
    """Classify every change from ``old`` to ``new``; each consumer's verdict counts only the columns it reads."""
    matched = _identity(old, new)
    continued = {o.name: n for n, o in matched.items()}
    new_by_name = {c.name: c for c in new.columns}
    changes: list[Change] = []
    for col in old.columns:
        if col.name in continued:
            changes.extend(_column_changes(col, new_by_name[continued[col.name]]))
        else:
            changes.append(Change(col.name, ChangeKind.REMOVAL, type_text(col), None, True))
    for col in new.columns:
        if col.name not in matched:  # a new non-nullable column has no value in existing rows: breaking (no reader reads it yet)
            changes.append(Change(col.name, ChangeKind.ADDITIVE, None, type_text(col), not col.nullable))
    renamed_key = [continued.get(k, k) for k in old.key]
    if renamed_key != list(new.key):
        changes.append(Change(None, ChangeKind.KEY_CHANGE, list(old.key), list(new.key), True))
    return SchemaDiff(tuple(changes), tuple(consumer_verdict(changes, c) for c in consumers))


def consumer_verdict(changes: Sequence[Change], consumer: Consumer) -> ConsumerVerdict:
    """Breaking for ``consumer`` when a breaking change touches a column it reads, or the key (the grain) changed."""
    reads = set(consumer.columns)
    broken = tuple(c for c in changes if c.breaking and (c.kind is ChangeKind.KEY_CHANGE or c.column in reads))
    return ConsumerVerdict(consumer.name, tuple(consumer.columns), broken)


def refuse_breaking(diff: SchemaDiff, *, definition: str) -> None:
    """Raise :class:`ConsumerBreakError` naming the first consumer, column and change kind the diff breaks."""
    for verdict in diff.consumers:
        if verdict.broken_by:
            first = verdict.broken_by[0]
            others = f" (and {len(verdict.broken_by) - 1} more)" if len(verdict.broken_by) > 1 else ""
            raise ConsumerBreakError(
                f"{definition}: the changed output contract breaks consumer {verdict.name!r}: column {first.column or '(key)'!r} "
                f"{first.kind.value} {_text(first.old)} -> {_text(first.new)}{others}; publish it as a new definition version"
            )


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return "none" if value is None else str(value)


__all__ = [
    "BREAKING",
    "COMPATIBLE",
    "Change",
    "ChangeKind",
    "Consumer",
    "ConsumerBreakError",
    "ConsumerVerdict",
    "SchemaDiff",
    "consumer_verdict",
    "diff_contracts",
    "refuse_breaking",
    "type_change_kind",
    "type_text",
]
