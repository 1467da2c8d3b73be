"""The pyiceberg SQL catalog of the canonical tables: its properties (local or S3 warehouse) and construction."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

from dsv_platform.core.errors import EnvironmentSetupError


def catalog_properties(
    catalog_url: str, warehouse: str, *, s3_region: str = "us-east-1", s3_endpoint_url: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """SqlCatalog properties: the catalog URL, the warehouse and, for s3://, the S3 FileIO endpoint."""
    if "://" not in warehouse:
        path = Path(warehouse).resolve()
        path.mkdir(parents=True, exist_ok=True)
        warehouse = path.as_uri()
    props = {"uri": catalog_url, "warehouse": warehouse}
    if warehouse.startswith("s3://"):
        props["s3.region"] = s3_region
        if s3_endpoint_url:
            props["s3.endpoint"] = s3_endpoint_url
    props.update(extra or {})
    return props


def build_catalog(catalog_url: str, warehouse: str, *, name: str = "dsv", **options: Any) -> SqlCatalog:
    """The pyiceberg SQL catalog (SQLite embedded, PostgreSQL in production); ``options`` as :func:`catalog_properties`."""
    try:
        return SqlCatalog(name, **catalog_properties(catalog_url, warehouse, **options))
    except (ValueError, ImportError) as exc:  # sqlalchemy's ArgumentError is a ValueError: a URL it cannot parse, a missing driver
        raise EnvironmentSetupError(f"DSV_ICEBERG_CATALOG_URL: not a usable catalog URL ({type(exc).__name__}: {exc})") from exc


__all__ = ["build_catalog", "catalog_properties"]
