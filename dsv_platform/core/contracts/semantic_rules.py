"""Evaluate a contract's semantic rules on a table (vectorized, pure).

:func:`declared_rules` lists what a contract declares (rule, family, column,
severity), so the Dagster checks are known before any data; :func:`evaluate`
returns one :class:`RuleResult` per declared rule, against an optional baseline
table for drift and volume (:mod:`dsv_platform.core.contracts.drift`); :func:`load_rules` are
the ones a canonical partition load evaluates (no baseline). Details: docs/contracts.md
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.contracts import drift
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.contracts.semantic import BLOCK, DEFAULT_SEVERITY, FAMILY, QUANTILES, RuleResult
from dsv_platform.core.errors import ContractError

LOAD_SKIPPED = frozenset({"drift", "volume"})  # families a canonical load does not evaluate


@dataclass(frozen=True)
class Rule:
    """A declared rule: ``rule`` names the check (``typical_p50``), ``params`` its bound."""

    rule: str
    column: str | None
    severity: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def family(self) -> str:
        return FAMILY[self.rule.split("_")[0] if self.rule.startswith(("typical_", "drift_")) else self.rule]


def _severity(col: Column, rule: str, inner: Mapping[str, Any] | None = None) -> str:
    if inner is not None and "severity" in inner:
        return str(inner["severity"])
    explicit = (col.expect or {}).get("severity", {})
    return str(explicit.get(rule, DEFAULT_SEVERITY[rule]))


def _column_rules(col: Column) -> list[Rule]:
    expect = col.expect or {}
    rules: list[Rule] = []
    if col.value_range is not None and (col.type.is_integer or col.type.is_float or col.type is LogicalType.DECIMAL):
        rules.append(Rule("range", col.name, _severity(col, "range"), {"min": col.value_range[0], "max": col.value_range[1]}))
    if col.allowed_values is not None:
        rules.append(Rule("allowed_values", col.name, _severity(col, "allowed_values"), {"values": col.allowed_values}))
    if "max_null_rate" in expect:
        rules.append(Rule("max_null_rate", col.name, _severity(col, "max_null_rate"), {"max": expect["max_null_rate"]}))
    if "max_unknown_rate" in expect:
        params = {"max": expect["max_unknown_rate"], "values": tuple(expect["unknown_values"])}
        rules.append(Rule("max_unknown_rate", col.name, _severity(col, "max_unknown_rate"), params))
    typical = expect.get("typical", {})
    for q in ("p50", "p99"):
        if q in typical:
            rules.append(Rule(f"typical_{q}", col.name, _severity(col, "typical", typical), {"q": QUANTILES[q], "band": tuple(typical[q])}))
    spec = col.drift or {}
    for key in sorted(k for k in spec if k != "severity"):
        name = f"drift_{key.split('_')[0]}" if key.endswith("_max_change") else f"drift_{key.removesuffix('_max')}"
        rules.append(Rule(name, col.name, _severity(col, "drift", spec), {"max": spec[key]}))
    return rules


def declared_rules(contract: Contract) -> tuple[Rule, ...]:
    """Every rule ``contract`` declares, in a stable order (columns first, then the table rules)."""
    rules = [r for col in contract.columns for r in _column_rules(col)]
    exp = contract.expectations or {}
    if "unique" in exp:
        rules.append(Rule("unique", ",".join(exp["unique"]["columns"]), exp["unique"]["severity"], {"columns": tuple(exp["unique"]["columns"])}))
    for pop in exp.get("population", []):
        rules.append(Rule("population", pop["column"], pop["severity"], {k: v for k, v in pop.items() if k not in ("column", "severity")}))
    if "max_volume_change" in exp:
        vol = exp["max_volume_change"]
        rules.append(Rule("max_volume_change", None, vol["severity"], {"max": vol["max"], "partition_by": contract.partition_by}))
    return tuple(rules)


def families_of(rules: tuple[Rule, ...]) -> dict[str, bool]:
    """Rule family -> whether it holds a blocking rule."""
    out: dict[str, bool] = {}
    for r in rules:
        out[r.family] = out.get(r.family, False) or r.severity == BLOCK
    return out


def families(contract: Contract) -> dict[str, bool]:
    """Rule family -> whether it holds a blocking rule, over everything ``contract`` declares."""
    return families_of(declared_rules(contract))


def declares_semantic_keys(contract: Contract) -> bool:
    """Whether ``contract`` declares a semantic key beyond the row-level ``range`` and ``allowed_values``."""
    return bool(contract.expectations) or any(c.expect or c.drift for c in contract.columns)


def load_rules(contract: Contract) -> tuple[Rule, ...]:
    """The rules a canonical load evaluates on a loaded partition: all but drift and volume (they need a baseline).

    None when the contract declares no semantic key (its ``range`` and ``allowed_values`` are Pandera's business).
    """
    if not declares_semantic_keys(contract):
        return ()
    return tuple(r for r in declared_rules(contract) if r.family not in LOAD_SKIPPED)


def load_families(contract: Contract) -> dict[str, bool]:
    """Rule family -> whether it holds a blocking rule, over :func:`load_rules`."""
    return families_of(load_rules(contract))


def _result(rule: Rule, passed: bool, observed: float | int | str | None, bound: str) -> RuleResult:
    if isinstance(observed, float):
        observed = float(f"{observed:.6g}")
    return RuleResult(rule.rule, rule.family, rule.column, rule.severity, bool(passed), observed, bound)


def _examples(values: pa.Array | pa.ChunkedArray, mask: pa.Array | pa.ChunkedArray) -> str:
    bad = pc.filter(values, pc.fill_null(mask, False))
    shown = ", ".join(repr(v) for v in pc.unique(bad).to_pylist()[:3])
    return f"{len(bad)} rows" + (f", e.g. {shown}" if len(bad) else "")


def _range(rule: Rule, values: pa.ChunkedArray) -> RuleResult:
    lo, hi = rule.params["min"], rule.params["max"]
    nums = drift.as_float(values)
    mm = pc.min_max(nums).as_py() if nums is not None else {"min": None, "max": None}
    ok = mm["min"] is None or ((lo is None or mm["min"] >= lo) and (hi is None or mm["max"] <= hi))
    observed = "no values" if mm["min"] is None else f"[{mm['min']:.6g}, {mm['max']:.6g}]"
    return _result(rule, ok, observed, f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]")


def _membership(rule: Rule, values: pa.ChunkedArray, allowed: tuple[Any, ...], *, inside: bool) -> RuleResult:
    try:
        value_set = pa.array(list(allowed)).cast(values.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ContractError(f"rule {rule.rule}: the values {list(allowed)[:5]} do not fit the column's type {values.type}", column=rule.column) from exc
    member = pc.is_in(values, value_set=value_set)
    mask = pc.and_(pc.invert(member) if inside else member, pc.is_valid(values))  # a null is max_null_rate's business
    text = _examples(values, mask)
    shown = ", ".join(repr(v) for v in allowed[:5]) + (f", ... ({len(allowed)} values)" if len(allowed) > 5 else "")
    return _result(rule, text.startswith("0 rows"), text, f"{'in' if inside else 'not in'} [{shown}]")


def _rate(rule: Rule, values: pa.ChunkedArray, rows: int) -> RuleResult:
    if rule.rule == "max_null_rate":
        hits = values.null_count
    else:
        hits = int(pc.sum(pc.is_in(values, value_set=pa.array(list(rule.params["values"])).cast(values.type))).as_py() or 0)
    rate = hits / rows if rows else 0.0
    return _result(rule, rate <= rule.params["max"], rate, f"<= {rule.params['max']:g}")


def _typical(rule: Rule, values: pa.ChunkedArray) -> RuleResult:
    lo, hi = rule.params["band"]
    q = drift.quantile(values, rule.params["q"])
    return _result(rule, q is None or lo <= q <= hi, q if q is not None else "no values", f"[{lo:g}, {hi:g}]")


def _population(rule: Rule, values: pa.ChunkedArray) -> RuleResult:
    if "not_matching" in rule.params:
        pattern = rule.params["not_matching"]
        mask = pc.match_substring_regex(values.cast(pa.string()), pattern)
        text = _examples(values, mask)
        return _result(rule, text.startswith("0 rows"), text, f"no value matching /{pattern}/")
    if "in" in rule.params:
        return _membership(rule, values, tuple(rule.params["in"]), inside=True)
    return _membership(rule, values, tuple(rule.params["not_in"]), inside=False)


def duplicate_rows(table: pa.Table, columns: list[str]) -> int:
    """Rows beyond the first of each distinct value of ``columns`` (nulls equal, as in a group-by).

    One integer, timestamp or date column without nulls is sorted with numpy
    and adjacent values compared (a few times faster than Arrow's group-by).
    """
    if len(columns) == 1:
        values = table.column(columns[0])
        t = values.type
        if not values.null_count and (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)):
            ordered = np.sort(values.to_numpy())
            return int(np.count_nonzero(ordered[1:] == ordered[:-1]))
    groups = table.select(columns).group_by(columns).aggregate([([], "count_all")])
    return int(pc.sum(pc.subtract(groups.column("count_all"), 1)).as_py() or 0)


def _unique(rule: Rule, table: pa.Table) -> RuleResult:
    dup = duplicate_rows(table, list(rule.params["columns"]))
    return _result(rule, dup == 0, f"{dup} duplicate rows", "0 duplicate rows")


def evaluate_rule(rule: Rule, table: pa.Table, baseline: pa.Table | None) -> RuleResult:
    if rule.rule == "unique":
        return _unique(rule, table)
    if rule.rule == "max_volume_change":
        observed, bound = drift.volume_change(table, baseline, rule.params["partition_by"]), f"<= {rule.params['max']:g} (relative)"
        return _result(rule, observed is None or observed <= rule.params["max"], "no baseline" if observed is None else observed, bound)
    assert rule.column is not None
    values = table.column(rule.column)
    if rule.rule.startswith("drift_"):
        base = baseline.column(rule.column) if baseline is not None and rule.column in baseline.column_names else None
        observed_drift = drift.drift_of(rule.rule, values, base)
        passed = observed_drift is None or observed_drift <= rule.params["max"]
        return _result(rule, passed, "no baseline" if observed_drift is None else observed_drift, f"<= {rule.params['max']:g}")
    if rule.rule == "range":
        return _range(rule, values)
    if rule.rule == "allowed_values":
        return _membership(rule, values, tuple(rule.params["values"]), inside=True)
    if rule.rule in ("max_null_rate", "max_unknown_rate"):
        return _rate(rule, values, table.num_rows)
    if rule.rule.startswith("typical_"):
        return _typical(rule, values)
    return _population(rule, values)


def evaluate(table: pa.Table, contract: Contract, baseline: pa.Table | None = None) -> tuple[RuleResult, ...]:
    """One result per declared rule of ``contract`` on ``table`` (drift and volume against ``baseline``)."""
    with drift.shared_statistics():  # a column's quantiles and frequencies, once for all its rules
        return tuple(evaluate_rule(rule, table, baseline) for rule in declared_rules(contract))


def evaluate_load(table: pa.Table, contract: Contract) -> tuple[RuleResult, ...]:
    """One result per rule of :func:`load_rules` on ``table`` (a loaded canonical partition)."""
    return tuple(evaluate_rule(rule, table, None) for rule in load_rules(contract))


def passed(results: tuple[RuleResult, ...]) -> bool:
    return all(r.passed for r in results if r.blocking)
