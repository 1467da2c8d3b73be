"""A dataset definition's ``split_policy``, read through the policy registry and checked against the output contract.

A policy that cannot work for the definition is refused when the configuration loads,
naming the file and the key: a column the output contract does not have, or of the
wrong kind (a time split needs a non-null timestamp column, the others strings or
integers); an example id the assignment cannot hash; a contract column named like a
composite key's example id. The shapes: docs/configuration.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.identity.example_id import EXAMPLE_ID, example_id_column
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
    """The policy document of ``raw`` (any registered policy's short form or its document) for ``contract``'s examples.

    A composite key's example id is the string column ``example_id`` (core/identity/example_id.py): no contract
    column may take that name, and a policy may read it only where it needs an identifier.
    """
    identifier = example_id_column(contract)
    if len(contract.key) == 1:
        _check_column(contract, identifier, ColumnNeed.IDENTIFIER, file=file, key="contract.key", what="the example id")
    elif EXAMPLE_ID in contract.column_names:
        raise ConfigError(
            f"a composite key {list(contract.key)} identifies an example by a column {EXAMPLE_ID!r}; rename the contract's column {EXAMPLE_ID!r}",
            file=file,
            key="contract.columns",
        )
    policy = policy_from_config(raw, identifier=identifier, file=file)
    column = dataset_column(policy, identifier)
    if column is not None:  # None: a legacy seeded draw by row position
        key = f"split_policy.{policy.column_key}" if policy.column is not None and policy.column_key else "split_policy"
        if column == identifier and identifier == EXAMPLE_ID:
            if policy.needs is not ColumnNeed.IDENTIFIER:
                what = f"the {policy.policy_name} column must be {_KINDS[policy.needs]} of the output contract"
                raise ConfigError(f"{what}, not the composite example id", file=file, key=key)
        else:
            _check_column(contract, column, policy.needs, file=file, key=key, what=f"the {policy.policy_name} column")
    return policy.to_document()
