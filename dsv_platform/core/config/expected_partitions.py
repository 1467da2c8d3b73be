"""The expected-partitions gate: every day of the observation window is a partition of the realization, or declared empty.

Under ``gates`` of a dataset partitioned by its window's date column: ``expected_partitions: every_day`` or
``{declared_empty: [2026-06-14]}``. A day without rows that was not declared empty blocks the publication,
naming the day (a source that silently skipped a day is caught before anyone trains on the gap); a day
declared empty that has rows is a warning (the declaration is out of date). Details: docs/configuration.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError, check_keys
from dsv_platform.core.contracts.contract import Contract, LogicalType
from dsv_platform.core.publication.gates import GateResult

GATE = "expected_partitions"
KEY = f"gates.{GATE}"
SHOWN = 10  # days named in a gate's detail; the count says how many more


@dataclass(frozen=True)
class ExpectedPartitions:
    declared_empty: tuple[dt.date, ...] = ()


def parse_expected_partitions(value: Any, *, file: str | Path, window: Sequence[dt.date], column: str, contract: Contract) -> ExpectedPartitions:
    """``every_day`` or ``{declared_empty: [ISO days]}``, each declared day inside ``window``; the dataset partitioned by ``column``."""
    if contract.partition_by != column or contract.column(column).type is not LogicalType.DATE:
        raise ConfigError(
            f"needs the output contract partitioned by the observation window's date column {column!r} (partition_by: {contract.partition_by!r})",
            file=file,
            key=KEY,
        )
    if value == "every_day":
        return ExpectedPartitions()
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be 'every_day' or {{declared_empty: [days]}}, got {value!r}", file=file, key=KEY)
    raw = check_keys(value, file=file, where=KEY, allowed={"declared_empty"}, required={"declared_empty"})
    days = raw["declared_empty"]
    if not isinstance(days, list):
        raise ConfigError(f"must be a list of days (YYYY-MM-DD), got {days!r}", file=file, key=f"{KEY}.declared_empty")
    declared = []
    for text in days:
        try:
            day = text if isinstance(text, dt.date) and not isinstance(text, dt.datetime) else dt.date.fromisoformat(str(text))
        except ValueError:
            raise ConfigError(f"not a day (YYYY-MM-DD): {text!r}", file=file, key=f"{KEY}.declared_empty") from None
        if day not in window:
            raise ConfigError(f"{day} is outside the observation window {window[0]}..{window[-1]}", file=file, key=f"{KEY}.declared_empty")
        declared.append(day)
    return ExpectedPartitions(tuple(sorted(set(declared))))


def _named(days: Sequence[dt.date]) -> str | None:
    if not days:
        return None
    shown = ", ".join(d.isoformat() for d in days[:SHOWN])
    return shown if len(days) <= SHOWN else f"{shown} and {len(days) - SHOWN} more"


def expected_partitions_gates(expected: ExpectedPartitions, window: Sequence[dt.date], column: str, present: Collection[str]) -> list[GateResult]:
    """The blocking gate (every expected day present) and, when a declared-empty day has rows, a warning saying which."""
    key = {d: f"{column}={d.isoformat()}" for d in window}  # the realization's partition keys (hive style, canonical date text)
    want = [d for d in window if d not in expected.declared_empty]
    missing = [d for d in want if key[d] not in present]
    detail = {"expected": len(want), "present": len(want) - len(missing), "missing": _named(missing), "declared_empty": len(expected.declared_empty)}
    gates = [GateResult(GATE, not missing, {**detail, "bound": "every day of the window present or declared empty"})]
    stale = [d for d in expected.declared_empty if key[d] in present]
    if stale:
        gates.append(GateResult(f"{GATE}:declared_empty_has_rows", False, {"days": _named(stale), "bound": "a declared-empty day has no rows"}, blocking=False))
    return gates
