"""Declarative row transforms of a dataset definition: derived columns, then an aggregation.

``derive`` adds exact decimal products (rounded to a stated scale); ``aggregate``
groups by columns and an optional time bucket in a named time zone (rules from the
pinned tzdata package, :mod:`dsv_platform.core.config.timezones`) and computes measures.
A bucket keeps its UTC start instant, its local wall-clock label and UTC offset, so
hours stay unambiguous across a DST change. The computing is in :mod:`dsv_platform.core.assembly.transform`
(pyarrow, imported only by builds). docs/configuration.md
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dsv_platform.core.config.timezones import zone
from dsv_platform.core.config_yaml import ConfigError, check_keys, names_list, need
from dsv_platform.core.errors import ConfigurationError, DsvError

ROUNDING = {"half_even": "half_to_even", "half_up": "half_up"}
MEASURES = ("sum", "count", "min", "max")
DERIVE_KEYS = frozenset({"name", "multiply", "precision", "scale", "rounding"})
BUCKET_KEYS = frozenset({"column", "every", "timezone", "start", "local", "offset_minutes", "local_date"})
_EVERY = re.compile(r"^(?P<n>\d+)(?P<unit>[hm])\Z")
_US = 1_000_000
ZoneOf = Callable[[str], ZoneInfo]


class TransformError(DsvError):
    """The rows handed to a transform lack a column it needs."""


@dataclass(frozen=True)
class Derived:
    """``name`` = the product of ``multiply``'s two decimal columns, rounded to ``scale`` (``rounding``); null if either is null."""

    name: str
    multiply: tuple[str, ...]
    precision: int
    scale: int
    rounding: str = "half_even"


@dataclass(frozen=True)
class TimeBucket:
    """Buckets of ``every`` (dividing one hour) of ``column``'s instants, on the local clock of ``timezone``."""

    column: str
    every: dt.timedelta
    timezone: str
    start: str
    local: str | None = None
    offset_minutes: str | None = None
    local_date: str | None = None

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(c for c in (self.start, self.local, self.offset_minutes, self.local_date) if c)


@dataclass(frozen=True)
class Measure:
    name: str
    function: str
    column: str


@dataclass(frozen=True)
class Aggregation:
    group_by: tuple[str, ...]
    bucket: TimeBucket | None
    measures: tuple[Measure, ...]

    @property
    def inputs(self) -> tuple[str, ...]:
        bucket = (self.bucket.column,) if self.bucket else ()
        return tuple(dict.fromkeys([*self.group_by, *bucket, *(m.column for m in self.measures)]))

    @property
    def outputs(self) -> tuple[str, ...]:
        return (*self.group_by, *(self.bucket.outputs if self.bucket else ()), *(m.name for m in self.measures))


def transform_zones(window_zone: str | None, aggregation: Aggregation | None) -> tuple[str, ...]:
    """The time zones a recipe uses (its observation window's and its bucket's), sorted."""
    bucket = aggregation.bucket if aggregation is not None else None
    return tuple(sorted({z for z in (window_zone, bucket.timezone if bucket else None) if z}))


def transform_inputs(derived: tuple[Derived, ...], aggregation: Aggregation | None) -> tuple[str, ...]:
    """Columns the derived columns and the aggregation read (besides the derived columns themselves)."""
    made = {d.name for d in derived}
    wanted = [c for d in derived for c in d.multiply] + list(aggregation.inputs if aggregation else ())
    return tuple(dict.fromkeys(c for c in wanted if c not in made))


def transform_outputs(derived: tuple[Derived, ...], aggregation: Aggregation | None) -> tuple[str, ...]:
    """Columns the transforms make: the derived columns and the aggregation's group, bucket and measure columns."""
    return tuple(dict.fromkeys([*(d.name for d in derived), *(aggregation.outputs if aggregation else ())]))


# ---------------------------------------------------------------- parsing


def check_zone(name: str, *, file: str | Path, key: str) -> str:
    """``name`` if the tzdata package has that zone, else a ConfigError naming the file and key."""
    try:
        zone(name)
    except ConfigurationError as exc:
        raise ConfigError(str(exc), file=file, key=key) from exc
    return name


def parse_derive(doc: Mapping[str, Any], file: str | Path) -> tuple[Derived, ...]:
    raw = doc.get("derive", [])
    if not isinstance(raw, list):
        raise ConfigError(f"must be a list of derived columns, got {raw!r}", file=file, key="derive")
    out = []
    for i, item in enumerate(raw):
        where = f"derive[{i}]"
        d = check_keys(item, file=file, where=where, allowed=DERIVE_KEYS, required={"name", "multiply", "precision", "scale"})
        factors = names_list(d, "multiply", file=file, where=where)
        if len(factors) != 2:
            raise ConfigError(f"must name two decimal columns, got {list(factors)}", file=file, key=f"{where}.multiply")
        rounding = d.get("rounding", "half_even")
        if rounding not in ROUNDING:
            raise ConfigError(f"must be one of {sorted(ROUNDING)}, got {rounding!r}", file=file, key=f"{where}.rounding")
        scale, precision = need(d, "scale", int, file=file, where=where), need(d, "precision", int, file=file, where=where)
        out.append(Derived(need(d, "name", str, file=file, where=where), factors, precision, scale, rounding))
    return tuple(out)


def _bucket(raw: Any, file: str | Path) -> TimeBucket:
    where = "aggregate.bucket"
    b = check_keys(raw, file=file, where=where, allowed=BUCKET_KEYS, required={"column", "every", "timezone", "start"})
    m = _EVERY.match(str(b["every"]))
    every = dt.timedelta(**{"hours" if m["unit"] == "h" else "minutes": int(m["n"])}) if m else dt.timedelta(0)
    if not m or every <= dt.timedelta(0) or dt.timedelta(hours=1) % every:
        raise ConfigError(f"must be a duration dividing one hour ('1h', '30m', '15m'), got {b['every']!r}", file=file, key=f"{where}.every")
    name = check_zone(need(b, "timezone", str, file=file, where=where), file=file, key=f"{where}.timezone")
    optional = {k: need(b, k, str, file=file, where=where) for k in ("local", "offset_minutes", "local_date") if k in b}
    return TimeBucket(need(b, "column", str, file=file, where=where), every, name, need(b, "start", str, file=file, where=where), **optional)


def parse_aggregate(doc: Mapping[str, Any], file: str | Path) -> Aggregation | None:
    if "aggregate" not in doc:
        return None
    a = check_keys(doc["aggregate"], file=file, where="aggregate", allowed={"group_by", "bucket", "measures"}, required={"group_by", "measures"})
    measures = []
    raw = a["measures"]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"must list at least one measure, got {raw!r}", file=file, key="aggregate.measures")
    for i, item in enumerate(raw):
        where = f"aggregate.measures[{i}]"
        m = check_keys(item, file=file, where=where, allowed={"name", *MEASURES}, required={"name"})
        functions = [f for f in MEASURES if f in m]
        if len(functions) != 1:
            raise ConfigError(f"needs exactly one of {list(MEASURES)} naming its input column", file=file, key=where)
        measures.append(Measure(need(m, "name", str, file=file, where=where), functions[0], need(m, functions[0], str, file=file, where=where)))
    bucket = _bucket(a["bucket"], file) if "bucket" in a else None
    return Aggregation(names_list(a, "group_by", file=file, where="aggregate"), bucket, tuple(measures))
