"""What a dataset definition declares for its record beyond the recipe: ``purpose``, ``retention_until``, and the
sources' contract ``version`` (each feature source named ``name:vN`` in the manifest's ``feature_versions``).

``purpose`` (one line) is part of the recipe when declared; absent, the recipe keeps its bytes. ``retention_until``
(a date: through the end of that UTC day; or an instant with an offset) keeps every readable realization of the
definition from GC until then (a ``definition_retention`` root); it is not part of the recipe. Details:
docs/configuration.md
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from dsv_platform.core.config_yaml import ConfigError

RETENTION_KIND = "definition_retention"  # the retention root kind a declared retention_until is kept by
_VERSION = re.compile(r"^v?(?P<n>[1-9][0-9]{0,8})\Z")


class Versioned(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int | None: ...


def parse_purpose(value: Any, *, file: str | Path) -> str | None:
    """``purpose: "..."``: a non-empty line of text, or None when not declared."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
        raise ConfigError(f"must be one non-empty line of text saying what the dataset is for, got {value!r}", file=file, key="purpose")
    return value.strip()


def parse_retention_until(value: Any, *, file: str | Path) -> dt.datetime | None:
    """``retention_until``: an ISO date (kept through the end of that UTC day) or an ISO instant with an offset, as UTC."""
    if value is None:
        return None
    text = value if isinstance(value, str) else None
    try:
        if text is not None and len(text) == 10:
            return dt.datetime.combine(dt.date.fromisoformat(text) + dt.timedelta(days=1), dt.time(), dt.UTC)
        at = dt.datetime.fromisoformat(text) if text is not None else None
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        wanted = "an ISO date (2027-12-31) or an instant with an offset (2027-12-31T00:00:00Z)"
        raise ConfigError(f"must be {wanted}, got {value!r}", file=file, key="retention_until")
    return at.astimezone(dt.UTC)


def parse_contract_version(value: Any, *, file: str | Path) -> int | None:
    """A source contract's ``version``: ``N`` or ``"vN"`` (N >= 1), or None when not declared."""
    if value is None:
        return None
    m = _VERSION.match(str(value)) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    if m is None:
        raise ConfigError(f"must be a contract version N or 'vN' (N >= 1), got {value!r}", file=file, key="version")
    return int(m["n"])


def feature_versions(sources: Iterable[Versioned]) -> dict[str, str]:
    """``{source: "vN"}`` for every source that declares its contract version (``source:vN``); the others are not listed."""
    return {s.name: f"v{s.version}" for s in sources if s.version is not None}


def feature_names(versions: Mapping[str, str | int]) -> list[str]:
    """``["name:vN", ...]`` in name order."""
    return [f"{name}:{version}" for name, version in sorted(versions.items())]
