"""Service levels of a dataset definition (``slo:``): thresholds on the status figures, checked, not just shown.

``slo: {usable_freshness: 26h, publication_lag: 6h}``: the newest realization that passed every gate is at most
26 h old, and it was published at most 6 h after its watermark. Not part of the recipe (changing an objective is
not a new version). ``dsv status`` and the ``dataset_observability`` asset's ``slos_met`` check report each one;
a definition with no usable realization misses every objective (fail closed). Details: docs/configuration.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError, check_keys
from dsv_platform.core.publication.lag import parts_over

OBJECTIVES = ("usable_freshness", "publication_lag")
FIGURE = {"usable_freshness": "freshness_seconds", "publication_lag": "publication_lag_seconds"}  # the status figure each bounds


@dataclass(frozen=True)
class Slo:
    usable_freshness: dt.timedelta | None = None
    publication_lag: dt.timedelta | None = None

    def bounds(self) -> dict[str, dt.timedelta]:
        return {name: bound for name in OBJECTIVES if (bound := getattr(self, name)) is not None}


def parse_slo(value: Any, *, file: str | Path, duration: Callable[..., dt.timedelta]) -> Slo | None:
    """The ``slo`` block: each objective a duration (``26h``, ``1d``), at least one."""
    if value is None:
        return None
    raw = check_keys(value, file=file, where="slo", allowed=set(OBJECTIVES))
    if not raw:
        raise ConfigError(f"names no objective; one or more of {list(OBJECTIVES)}", file=file, key="slo")
    return Slo(**{name: duration(raw[name], file=file, key=f"slo.{name}") for name in raw})


def slo_findings(slo: Slo | None, status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per objective: its bound, the observed figure (None without a usable realization) and whether it is met.

    ``publication_lag`` also says which part of the lag from valid time is over the bound (``over``: ``arrival``,
    upstream truth late; ``compute``, our build slow) beside the split itself (``lag``, core/publication/lag.py).
    """
    out = []
    for name, bound in (slo.bounds() if slo is not None else {}).items():
        observed = status.get(FIGURE[name])
        met = observed is not None and float(observed) <= bound.total_seconds()
        finding = {"objective": name, "bound_seconds": bound.total_seconds(), "observed_seconds": observed, "met": met}
        if name == "publication_lag":
            finding |= {"lag": status.get("lag"), "over": parts_over(status.get("lag"), bound.total_seconds())}
        out.append(finding)
    return out
