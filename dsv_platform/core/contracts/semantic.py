"""Semantic expectations of a contract: the keys, their parsing, and the rule result.

Column keys (``allowed_values_ref``, ``max_null_rate``, ``max_unknown_rate`` with
``unknown_values``, ``typical``, ``drift``, ``severity``) and the table block
``expectations`` (``max_volume_change``, ``population``, ``unique``, ``baseline``)
are validated here in shape; :mod:`dsv_platform.core.contracts.semantic_rules` evaluates them.
None of them enters the schema hash. Details: docs/contracts.md
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv_platform.core.errors import ContractError

BLOCK, WARN = "block", "warn"
SEVERITIES = (BLOCK, WARN)
COLUMN_RULES = ("range", "allowed_values", "max_null_rate", "max_unknown_rate", "typical", "drift")
SEMANTIC_COLUMN_KEYS = frozenset({"allowed_values_ref", "max_null_rate", "max_unknown_rate", "unknown_values", "typical", "severity"})
EXPECTATION_KEYS = frozenset({"max_volume_change", "population", "unique", "baseline"})
POPULATION_OPS = ("in", "not_in", "not_matching")
QUANTILES = {"p01": 0.01, "p50": 0.5, "p99": 0.99}
DRIFT_KEYS = frozenset({"p01_max_change", "p50_max_change", "p99_max_change", "psi_max", "tv_max", "severity"})
FAMILY = {
    "range": "values",
    "allowed_values": "values",
    "max_null_rate": "completeness",
    "max_unknown_rate": "completeness",
    "typical": "plausibility",
    "drift": "drift",
    "max_volume_change": "volume",
    "population": "population",
    "unique": "uniqueness",
}
DEFAULT_SEVERITY = {rule: (WARN if rule in ("drift", "max_volume_change") else BLOCK) for rule in FAMILY}


@dataclass(frozen=True)
class RuleResult:
    """One evaluated rule: ``observed`` against ``bound``; ``passed`` is False when the data is outside."""

    rule: str
    family: str
    column: str | None
    severity: str
    passed: bool
    observed: float | int | str | None
    bound: str

    @property
    def blocking(self) -> bool:
        return self.severity == BLOCK

    def to_document(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "family": self.family,
            "column": self.column,
            "severity": self.severity,
            "passed": self.passed,
            "observed": self.observed,
            "bound": self.bound,
        }

    def line(self) -> str:
        where = f"column {self.column!r}" if self.column else "table"
        return f"{where}: rule {self.rule} ({self.severity}): observed {self.observed}, bound {self.bound}"


def number(value: Any, *, file: str | None, column: str | None, key: str, low: float | None = None) -> float:
    """A finite number (YAML number or numeric string, as :func:`document_of` writes floats)."""
    try:
        if isinstance(value, bool):
            raise ValueError
        out = float(value)
    except (TypeError, ValueError):
        raise ContractError(f"{key!r} must be a number, got {value!r}", file=file, column=column) from None
    if not math.isfinite(out) or (low is not None and out < low):
        raise ContractError(f"{key!r} must be a finite number{f' >= {low:g}' if low is not None else ''}, got {value!r}", file=file, column=column)
    return out


def severity_of(value: Any, *, file: str | None, column: str | None, key: str) -> str:
    if value not in SEVERITIES:
        raise ContractError(f"{key!r} severity must be 'block' or 'warn', got {value!r}", file=file, column=column)
    return str(value)


def _band(value: Any, *, file: str | None, column: str, key: str) -> tuple[float, float]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise ContractError(f"'typical.{key}' must be a list [low, high], got {value!r}", file=file, column=column)
    lo, hi = (number(v, file=file, column=column, key=f"typical.{key}") for v in value)
    if lo > hi:
        raise ContractError(f"'typical.{key}' low {lo:g} is above high {hi:g}", file=file, column=column)
    return lo, hi


def read_reference(ref: Any, *, file: str | None, column: str, integer: bool = False) -> tuple[Any, ...]:
    """The values of a reference set file (one value a line; ``#`` comments; a ``.csv`` has a header line), relative to ``file``."""
    if not isinstance(ref, str) or not ref:
        raise ContractError(f"'allowed_values_ref' must be a file name, got {ref!r}", file=file, column=column)
    if file is None or not Path(file).exists():
        raise ContractError(f"'allowed_values_ref' {ref!r} needs a contract file to resolve against", file=file, column=column)
    path = Path(file).parent / ref
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"cannot read reference set {str(path)!r}: {getattr(exc, 'strerror', None) or exc}", file=file, column=column) from exc
    if path.suffix == ".csv":
        lines = lines[1:]
    values = tuple(dict.fromkeys(s for s in (line.split("#", 1)[0].strip() for line in lines) if s))
    if not values:
        raise ContractError(f"reference set {str(path)!r} holds no values", file=file, column=column)
    if integer:
        bad = [v for v in values if not v.lstrip("-").isdigit()]
        if bad:
            raise ContractError(f"reference set {str(path)!r}: {bad[0]!r} is not an integer", file=file, column=column)
        return tuple(int(v) for v in values)
    return values


def parse_drift(raw: Any, *, file: str | None, column: str, numeric: bool) -> dict[str, Any]:
    if not isinstance(raw, Mapping) or not raw or set(raw) - DRIFT_KEYS:
        raise ContractError(f"'drift' must be a mapping of {sorted(DRIFT_KEYS)}, got {raw!r}", file=file, column=column)
    out: dict[str, Any] = {"severity": severity_of(raw.get("severity", WARN), file=file, column=column, key="drift")}
    for key in sorted(set(raw) - {"severity"}):
        if key.endswith("_max_change") and not numeric:
            raise ContractError(f"'drift.{key}' needs a numeric column; use psi_max or tv_max", file=file, column=column)
        out[key] = number(raw[key], file=file, column=column, key=f"drift.{key}", low=0)
    return out


def parse_column_expect(raw: Mapping[str, Any], *, file: str | None, column: str, numeric: bool) -> dict[str, Any] | None:
    """The semantic keys of one column, normalized (``None`` when it declares none)."""
    out: dict[str, Any] = {}
    for key in ("max_null_rate", "max_unknown_rate"):
        if key in raw:
            out[key] = number(raw[key], file=file, column=column, key=key, low=0)
    if "unknown_values" in raw:
        values = raw["unknown_values"]
        if not isinstance(values, list) or not values:
            raise ContractError("'unknown_values' must be a non-empty list", file=file, column=column)
        out["unknown_values"] = list(values)
    if ("max_unknown_rate" in out) != ("unknown_values" in out):
        raise ContractError("'max_unknown_rate' and 'unknown_values' go together", file=file, column=column)
    if "typical" in raw:
        typical = raw["typical"]
        if not numeric or not isinstance(typical, Mapping) or not typical or set(typical) - {"p50", "p99", "severity"}:
            raise ContractError(f"'typical' must be a mapping of p50/p99 bands on a numeric column, got {typical!r}", file=file, column=column)
        out["typical"] = {k: list(_band(v, file=file, column=column, key=k)) for k, v in typical.items() if k != "severity"}
        if "severity" in typical:
            out["typical"]["severity"] = severity_of(typical["severity"], file=file, column=column, key="typical")
    if "severity" in raw:
        sev = raw["severity"]
        if not isinstance(sev, Mapping) or set(sev) - set(COLUMN_RULES):
            raise ContractError(f"'severity' must map rule names {list(COLUMN_RULES)} to block|warn, got {sev!r}", file=file, column=column)
        out["severity"] = {k: severity_of(v, file=file, column=column, key=k) for k, v in sev.items()}
    return out or None


def _population(raw: Any, *, file: str | None, columns: Sequence[str], index: int) -> dict[str, Any]:
    where = f"expectations.population[{index}]"
    if not isinstance(raw, Mapping) or raw.get("column") not in columns:
        raise ContractError(f"{where} needs a 'column' of the contract, got {raw!r}", file=file)
    ops = [op for op in POPULATION_OPS if op in raw]
    if len(ops) != 1 or set(raw) - {"column", "severity", *POPULATION_OPS}:
        raise ContractError(f"{where} needs exactly one of {list(POPULATION_OPS)}", file=file, column=raw["column"])
    value = raw[ops[0]]
    if (ops[0] == "not_matching") != isinstance(value, str) or (ops[0] != "not_matching" and not isinstance(value, list)):
        raise ContractError(f"{where}.{ops[0]} must be {'a regular expression' if ops[0] == 'not_matching' else 'a list'}", file=file, column=raw["column"])
    if ops[0] == "not_matching":
        try:
            re.compile(value)
        except re.error as exc:
            raise ContractError(f"{where}.not_matching is not a regular expression: {exc}", file=file, column=raw["column"]) from None
    sev = severity_of(raw.get("severity", BLOCK), file=file, column=raw["column"], key="population")
    return {"column": raw["column"], ops[0]: value, "severity": sev}


def parse_expectations(raw: Any, *, file: str | None, columns: Sequence[str], key: Sequence[str]) -> dict[str, Any] | None:
    """The contract's table-level ``expectations`` block, normalized."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - EXPECTATION_KEYS:
        raise ContractError(f"'expectations' must be a mapping of {sorted(EXPECTATION_KEYS)}, got {raw!r}", file=file)
    out: dict[str, Any] = {}
    if "max_volume_change" in raw:
        vol = raw["max_volume_change"]
        vol = vol if isinstance(vol, Mapping) else {"max": vol}
        sev = severity_of(vol.get("severity", WARN), file=file, column=None, key="max_volume_change")
        out["max_volume_change"] = {"max": number(vol.get("max"), file=file, column=None, key="max_volume_change", low=0), "severity": sev}
    if "population" in raw:
        rules = raw["population"]
        if not isinstance(rules, list) or not rules:
            raise ContractError("'expectations.population' must be a non-empty list of rules", file=file)
        out["population"] = [_population(r, file=file, columns=columns, index=i) for i, r in enumerate(rules)]
    if "unique" in raw:
        out["unique"] = _unique(raw["unique"], file=file, columns=columns, key=key)
    if "baseline" in raw:
        if not isinstance(raw["baseline"], str) or not raw["baseline"]:
            raise ContractError(f"'expectations.baseline' must be a dataset reference, got {raw['baseline']!r}", file=file)
        out["baseline"] = raw["baseline"]
    return out


def _unique(raw: Any, *, file: str | None, columns: Sequence[str], key: Sequence[str]) -> dict[str, Any]:
    """``unique: true`` (the natural key), a list of columns, or ``{columns: [...], severity}``."""
    spec = raw if isinstance(raw, Mapping) else {"columns": list(key) if raw is True else raw}
    cols = spec.get("columns", list(key))
    if not isinstance(cols, list) or not cols or any(c not in columns for c in cols):
        raise ContractError(f"'expectations.unique' must name contract columns, got {raw!r}", file=file)
    return {"columns": list(cols), "severity": severity_of(spec.get("severity", BLOCK), file=file, column=None, key="unique")}


def document_of(value: Any) -> Any:
    """``value`` with floats written as strings (canonical JSON has no floats; :func:`number` reads them back)."""
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else int(value)
    if isinstance(value, Mapping):
        return {k: document_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [document_of(v) for v in value]
    return value
