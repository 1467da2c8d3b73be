"""Dagster's own catalog metadata from the configuration: owners, column schema, table name, row count (docs/configuration.md).

Owners come from the YAML ``owner`` (core/contracts/owners.py); ``dagster/column_schema`` from the
contract (type with its parameters, description, nullability, the natural key as unique, units, ranges and
allowed values as constraints); ``dagster/table_name`` and ``dagster/row_count`` go with every materialization;
a snapshot's freshness policy from the definition's ``slo.usable_freshness``.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from dsv_platform.core.config.slo import Slo
from dsv_platform.core.contracts.contract import Column, Contract, LogicalType
from dsv_platform.core.contracts.owners import catalog_owners

DATASETS_NAMESPACE = "datasets"


def owners(owner: str | None) -> list[str]:
    return list(catalog_owners(owner))


def _type(c: Column) -> str:
    if c.type is LogicalType.DECIMAL:
        return f"decimal({c.precision},{c.scale})"
    if c.type is LogicalType.TIMESTAMP and c.resolution:
        return f"timestamp[{c.resolution}]"
    return str(c.type.value)


def _other(c: Column) -> list[str]:
    """The column's declared constraints beyond nullability and uniqueness, as text."""
    other = [f"unit {c.unit}"] if c.unit else []
    if c.value_range is not None:
        other.append(f"range [{c.value_range[0]}, {c.value_range[1]}]")
    if c.allowed_values is not None:
        other.append(f"allowed values {list(c.allowed_values)}")
    return other


def column_schema(contract: Contract) -> dg.TableSchema:
    """The contract's columns as a table schema: the catalog's column view of the asset."""
    single_key = contract.key[0] if len(contract.key) == 1 else None
    columns = [
        dg.TableColumn(
            c.name,
            _type(c),
            description=c.description,
            constraints=dg.TableColumnConstraints(nullable=c.nullable, unique=c.name == single_key, other=_other(c)),
        )
        for c in contract.columns
    ]
    key = [f"natural key ({', '.join(contract.key)})"] if contract.key else []
    return dg.TableSchema(columns=columns, constraints=dg.TableConstraints(other=key))


def schema_metadata(contract: Contract) -> dict[str, Any]:
    """The asset spec's metadata carrying the column schema."""
    return {"dagster/column_schema": column_schema(contract)}


def table_metadata(table_name: str, rows: int) -> Mapping[str, dg.MetadataValue]:
    """A materialization's table name and row count as the catalog reads them."""
    return {"dagster/table_name": dg.MetadataValue.text(table_name), "dagster/row_count": dg.MetadataValue.int(rows)}


def dataset_table(name: str, version: str) -> str:
    """The name a dataset version's realizations go by in the catalog: ``datasets.<name>.<version>``."""
    return f"{DATASETS_NAMESPACE}.{name}.{version}"


def code_version(*parts: str | None) -> str:
    """An asset's ``code_version``: what decides its output besides its inputs, hashed (16 hex digits, shown in the UI).

    Dagster marks an asset "code version changed" when it differs from the one its latest materialization ran with."""
    return hashlib.sha256("\n".join(p or "-" for p in parts).encode()).hexdigest()[:16]


def module_source_hash(module: str) -> str | None:
    """SHA-256 of a Python module's source file (a label module), found without importing it; None when it has none."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not Path(origin).is_file():
        return None
    return hashlib.sha256(Path(origin).read_bytes()).hexdigest()


MIN_FAIL_WINDOW_SECONDS = 60
"""Dagster's least freshness window: a tighter objective is checked by ``slos_met`` alone."""


def freshness_policy(slo: Slo | None) -> dg.FreshnessPolicy | None:
    """``slo.usable_freshness`` as Dagster's time-window freshness policy on the snapshot asset: the asset is FAIL in the
    UI (and to freshness alerts) once its newest materialization (a published realization) is older than the bound."""
    bound = slo.usable_freshness if slo is not None else None
    if bound is None or bound.total_seconds() < MIN_FAIL_WINDOW_SECONDS:
        return None
    return dg.FreshnessPolicy.time_window(fail_window=bound)
