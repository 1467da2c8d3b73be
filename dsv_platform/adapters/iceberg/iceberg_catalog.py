"""The pyiceberg SQL catalog of the canonical tables: its properties (local or S3 warehouse) and construction."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pyiceberg.catalog.sql import SqlCatalog

from dsv_platform.core.errors import EnvironmentSetupError

log = logging.getLogger(__name__)


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


def moved_from(catalog_url: str, warehouse: str) -> str | None:
    """Where a SQLite catalog's tables were written when it is not under ``warehouse``: its home was moved or copied.

    The catalog and Iceberg's metadata hold absolute paths; read through the new place, a moved home's tables do not
    read, and a copy's writes would land in the original's warehouse (docs/reliability.md).
    """
    if not catalog_url.startswith("sqlite:///") or "://" in warehouse or not Path(catalog_url[10:]).is_file():
        return None
    root = Path(warehouse).resolve().as_uri().rstrip("/") + "/"
    try:
        with closing(sqlite3.connect(f"file:{Path(catalog_url[10:]).resolve().as_posix()}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT metadata_location FROM iceberg_tables WHERE metadata_location IS NOT NULL").fetchall()
    except sqlite3.Error:  # no table yet: nothing written anywhere
        return None
    for (location,) in rows:
        if location.startswith("file:") and not location.startswith(root):
            return str(location).split("/canonical/")[0].removeprefix("file://")
    return None


def build_catalog(catalog_url: str, warehouse: str, *, name: str = "dsv", **options: Any) -> SqlCatalog:
    """The pyiceberg SQL catalog (SQLite embedded, PostgreSQL in production); ``options`` as :func:`catalog_properties`.

    A SQLite catalog whose tables live under another folder was moved or copied: when that folder is gone (moved) its
    tables are relocated here (iceberg_relocate.py); when it is still there (a copy, or moved with the original kept),
    it is refused, one line naming both places and ``dsv home relocate``, so a copy never writes into the original.
    """
    origin = moved_from(catalog_url, warehouse)
    if origin is not None and Path(unquote(origin)).exists():
        raise EnvironmentSetupError(
            f"warehouse {Path(warehouse).resolve()}: its Iceberg catalog names tables under {unquote(origin)} (the home was moved or copied); "
            f"run `dsv home relocate` to make this home's tables its own (the original is not touched)"
        )
    if origin is not None:
        from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_catalog  # here: it imports pyiceberg's Avro writers

        moved = relocate_catalog(catalog_url, warehouse)
        if moved:
            log.warning("warehouse %s: relocated %d table(s) from %s (the home was moved)", Path(warehouse).resolve(), len(moved), unquote(origin))
    try:
        return SqlCatalog(name, **catalog_properties(catalog_url, warehouse, **options))
    except (ValueError, ImportError) as exc:  # sqlalchemy's ArgumentError is a ValueError: a URL it cannot parse, a missing driver
        raise EnvironmentSetupError(f"DSV_ICEBERG_CATALOG_URL: not a usable catalog URL ({type(exc).__name__}: {exc})") from exc


__all__ = ["build_catalog", "catalog_properties", "moved_from"]
