"""A definition's access policy (the ``access:`` key): declared purposes, restricted columns, a row filter.

``access: {purposes: [training, evaluation], restricted_columns: [card_id], row_filter: {column: country, not_in: [XX]}}``.
Pure: parsing and checking against the contract; services/trust/access.py decides who may read what.

Details: docs/configuration.md ("access") and docs/trust.md ("Access by purpose")
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError

ACCESS_KEYS = frozenset({"purposes", "restricted_columns", "row_filter"})
ROW_FILTER_OPS = ("in", "not_in", "equals")
_PURPOSE = re.compile(r"^[a-z][a-z0-9_.-]{0,63}\Z")

Scalar = str | int | bool


@dataclass(frozen=True)
class RowFilter:
    """Rows a reader sees: ``column`` in / not in ``values`` (``equals``: one value, as ``in``)."""

    column: str
    op: str
    values: tuple[Scalar, ...]

    @property
    def keeps_matches(self) -> bool:
        return self.op != "not_in"

    def describe(self) -> str:
        """The filter's shape without its values (values may be identifiers: never recorded in lineage or audit)."""
        return f"{self.column} {self.op} <{len(self.values)} value(s)>"


@dataclass(frozen=True)
class AccessPolicy:
    purposes: tuple[str, ...] = ()
    restricted_columns: tuple[str, ...] = ()
    row_filter: RowFilter | None = None

    def withheld(self, granted_columns: Sequence[str]) -> tuple[str, ...]:
        """Restricted columns a grant naming ``granted_columns`` does not see."""
        return tuple(c for c in self.restricted_columns if c not in set(granted_columns))


def _names(raw: Mapping[str, Any], key: str, file: str | Path, *, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"must be a list of names, got {value!r}", file=file, key=f"access.{key}")
    bad = [v for v in value if pattern is not None and not pattern.match(v)]
    if bad:
        raise ConfigError(f"{bad[0]!r} is not a purpose name (a-z 0-9 _ . -, starting with a letter)", file=file, key=f"access.{key}")
    if len(set(value)) != len(value):
        raise ConfigError(f"names a value twice: {value!r}", file=file, key=f"access.{key}")
    return tuple(value)


def _row_filter(raw: object, file: str | Path) -> RowFilter:
    if not isinstance(raw, Mapping) or "column" not in raw:
        raise ConfigError(f"must be {{column: NAME, in|not_in|equals: ...}}, got {raw!r}", file=file, key="access.row_filter")
    ops = [k for k in raw if k != "column"]
    if len(ops) != 1 or ops[0] not in ROW_FILTER_OPS:
        raise ConfigError(f"needs exactly one of {list(ROW_FILTER_OPS)} besides 'column', got {sorted(map(str, raw))}", file=file, key="access.row_filter")
    op, column, value = ops[0], raw["column"], raw[ops[0]]
    if not isinstance(column, str) or not column:
        raise ConfigError(f"column must be a column name, got {column!r}", file=file, key="access.row_filter.column")
    values = [value] if op == "equals" else value
    if not isinstance(values, list) or not values or not all(isinstance(v, (str, int, bool)) for v in values):
        raise ConfigError(f"must be a non-empty list of strings or integers, got {value!r}", file=file, key=f"access.row_filter.{op}")
    return RowFilter(column, op, tuple(values))


def parse_access(raw: object, *, file: str | Path) -> AccessPolicy:
    """The ``access`` block of a definition file; unknown keys and malformed values are one-line errors naming the key."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping with {sorted(ACCESS_KEYS)}, got {raw!r}", file=file, key="access")
    unknown = sorted(set(map(str, raw)) - ACCESS_KEYS)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown}; allowed: {sorted(ACCESS_KEYS)}", file=file, key="access")
    return AccessPolicy(
        purposes=_names(raw, "purposes", file, pattern=_PURPOSE),
        restricted_columns=_names(raw, "restricted_columns", file),
        row_filter=_row_filter(raw["row_filter"], file) if "row_filter" in raw else None,
    )


def check_access_columns(policy: AccessPolicy, columns: Sequence[str], *, file: str | Path) -> None:
    """Every column the policy names must be an output column of the definition's contract."""
    known = set(columns)
    for c in policy.restricted_columns:
        if c not in known:
            raise ConfigError(f"{c!r} is not a column of the contract (columns: {sorted(known)})", file=file, key="access.restricted_columns")
    if policy.row_filter is not None and policy.row_filter.column not in known:
        raise ConfigError(f"{policy.row_filter.column!r} is not a column of the contract (columns: {sorted(known)})", file=file, key="access.row_filter.column")


def access_of(raw: object, *, file: str | Path, columns: Sequence[str]) -> AccessPolicy:
    """A definition's policy from its ``access`` block (absent: no purposes declared, nothing restricted), checked against its columns."""
    if raw is None:
        return AccessPolicy()
    policy = parse_access(raw, file=file)
    check_access_columns(policy, columns, file=file)
    return policy
