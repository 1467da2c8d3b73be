"""Registered consumers: who reads a definition, and which of its columns.

A consumer is registered on a definition name; its columns must exist in the name's current
output contract (the version given, else the newest registered one, else the configuration
folder's newest). Registering a definition version again with a contract that breaks a
consumer is refused by the registry (docs/schema-evolution.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dsv_platform.adapters.registry.consumers import ConsumerRepository
from dsv_platform.core.contracts.contract import Contract, parse_contract
from dsv_platform.core.contracts.schema_diff import Consumer
from dsv_platform.core.errors import ConfigurationError, NotFoundError
from dsv_platform.core.publication.records import check_name, check_version

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


class UnknownConsumerColumnError(ConfigurationError):
    """A consumer names a column its definition's output contract does not declare (exit 2)."""


def split_definition(text: str) -> tuple[str, str | None]:
    """``name`` or ``name:version`` -> ``(name, version or None)``, both checked."""
    name, sep, version = text.partition(":")
    check_name(name)
    return name, check_version(version) if sep else None


def _version_order(version: str) -> tuple[tuple[int, object], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.findall(r"\d+|\D+", version))


def current_contract(platform: Platform, definition: str) -> tuple[str, Contract]:
    """``(name:version, output contract)`` of ``definition``: registered first, else from the configuration folder."""
    name, version = split_definition(definition)
    repo = ConsumerRepository(platform.registry)
    found = platform.registry.get_definition(name, version) if version else repo.latest_definition(name)
    if found is not None:
        where = f"{found.name}:{found.version}"
        return where, parse_contract(json.loads(found.contract_json), source=f"registered {where}")
    configured = [d for d in platform.config.datasets if d.name == name and version in (None, d.version)]
    if not configured:
        raise NotFoundError(f"no dataset definition {definition} (neither registered nor in the configuration folder)", ref=definition)
    newest = max(configured, key=lambda d: _version_order(d.version))
    return f"{newest.name}:{newest.version}", newest.contract


def add_consumer(platform: Platform, definition: str, name: str, columns: Sequence[str]) -> tuple[str, Consumer]:
    """Register ``name`` as a consumer of ``definition`` reading ``columns`` (again: replaces its columns)."""
    if not name.strip():
        raise ConfigurationError("a consumer needs a non-empty --name")
    cols = [c.strip() for c in columns if c.strip()]
    if not cols:
        raise ConfigurationError(f"consumer {name!r}: --columns names no column")
    where, contract = current_contract(platform, definition)
    declared = set(contract.column_names)
    for column in cols:
        if column not in declared:
            raise UnknownConsumerColumnError(f"{contract.source or where}: consumer {name!r}: column {column!r} is not a column of {where}")
    dataset, _ = split_definition(definition)
    return where, ConsumerRepository(platform.registry).add(dataset, name, list(dict.fromkeys(cols)), actor=platform.actor)


def list_consumers(platform: Platform, definition: str | None = None) -> list[tuple[str, Consumer]]:
    """``(definition name, consumer)`` pairs, all of them or those of one definition name."""
    dataset = split_definition(definition)[0] if definition else None
    return ConsumerRepository(platform.registry).list(dataset)


def registered_consumers(platform: Platform, definition: str) -> list[Consumer]:
    return [c for _, c in list_consumers(platform, definition)]


def remove_consumer(platform: Platform, definition: str, name: str) -> None:
    ConsumerRepository(platform.registry).remove(split_definition(definition)[0], name)


__all__ = [
    "UnknownConsumerColumnError",
    "add_consumer",
    "current_contract",
    "list_consumers",
    "registered_consumers",
    "remove_consumer",
    "split_definition",
]
