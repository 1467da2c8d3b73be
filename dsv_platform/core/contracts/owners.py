"""Who owns a source or dataset: the ``owner`` of its YAML file, as the catalog (Dagster's asset owners) names it.

An owner is an email address (``ana@example.com``), a team (``team:payments-data``) or a bare team name
(``payments-data``, which the catalog shows as ``team:payments-data``); ``unknown`` or no owner: none.
An owner with an ``@`` must be an email address as Dagster accepts it; anything else is a ConfigError
naming the file and the value (docs/configuration.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError

EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Z|a-z]{2,7}\b")  # Dagster's own test (dagster._core.utils.is_valid_email)
TEAM = "team:"
NOBODY = "unknown"


def owner_problem(owner: object) -> str | None:
    """Why ``owner`` is not an owner the catalog can show; None when it is one (or is absent)."""
    if owner is None:
        return None
    if not isinstance(owner, str) or not owner.strip():
        return f"owner must be an email address or a team name, got {owner!r}"
    if "@" in owner and not EMAIL.fullmatch(owner):
        return f"owner {owner!r} has an @ but is not an email address (name@example.com); a team is team:<name>"
    if owner.startswith(TEAM) and not owner[len(TEAM) :].strip():
        return f"owner {owner!r} names no team (team:<name>)"
    return None


def catalog_owners(owner: str | None) -> tuple[str, ...]:
    """``owner`` as Dagster asset owners: an email or ``team:<name>``; none for ``unknown`` or no owner."""
    if owner is None or owner == NOBODY or owner_problem(owner) is not None:
        return ()
    return (owner,) if EMAIL.fullmatch(owner) or owner.startswith(TEAM) else (f"{TEAM}{owner.strip()}",)


def owner_of(doc: Mapping[str, Any], file: str | Path) -> str:
    """The ``owner`` of a definition file's document (``unknown`` when absent); a malformed one is a ConfigError naming the file."""
    if (problem := owner_problem(doc.get("owner"))) is not None:
        raise ConfigError(problem, file=file, key="owner")
    return str(doc.get("owner", NOBODY))
