"""A dataset definition's ``split_policy``, read through the policy registry and checked against the output contract.

A policy that cannot work for the definition is refused when the configuration loads,
naming the file and the key: a column the output contract does not have, or of the
wrong kind (a time split needs a non-null timestamp column, the others strings or
integers); and an example id the assignment cannot hash. The shapes: docs/configuration.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.splits.policy import ColumnNeed, dataset_column, policy_from_config

_KINDS = {ColumnNeed.IDENTIFIER: "a string or integer column", ColumnNeed.TIME: "a timestamp column"}


def _fits(column: Column, need: ColumnNeed) -> bool:
    if need is ColumnNeed.TIME:
        return column.type is LogicalType.TIMESTAMP
    return column.type is LogicalType.STRING or column.type.is_integer


def _check_column(contract: Contract, name: str, need: ColumnNeed, *, file: str | Path, key: str, what: str) -> None:
    if name not in contract.column_names:
        raise ConfigError(f"{name!r} is not a column of the output contract {contract.column_names}", file=file, key=key)
    column = contract.column(name)
    if not _fits(column, need):
        raise ConfigError(f"{what} {name!r} must be {_KINDS[need]}, it is {column.type.value}", file=file, key=key)
    if column.nullable and need is ColumnNeed.TIME:  # a null identifier fails the build naming its row
        raise ConfigError(f"{what} {name!r} is nullable; every example needs a time to be split by", file=file, key=key)


def parse_split_policy(raw: Any, contract: Contract, *, file: str | Path) -> dict[str, Any]:
    """The policy document of ``raw`` (any registered policy's short form or its document) for ``contract``'s examples."""
    if len(contract.key) != 1:
        raise ConfigError(f"a split assignment identifies an example by a one-column key; the key is {list(contract.key)}", file=file, key="contract.key")
    identifier = contract.key[0]
    _check_column(contract, identifier, ColumnNeed.IDENTIFIER, file=file, key="contract.key", what="the example id")
    policy = policy_from_config(raw, identifier=identifier, file=file)
    column = dataset_column(policy, identifier)
    if column is not None:  # None: a legacy seeded draw by row position
        key = f"split_policy.{policy.column_key}" if policy.column is not None and policy.column_key else "split_policy"
        _check_column(contract, column, policy.needs, file=file, key=key, what=f"the {policy.policy_name} column")
    return policy.to_document()
