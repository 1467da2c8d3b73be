"""The pyiceberg catalog of the canonical tables, loaded through ``load_catalog``: SQL (SQLite, PostgreSQL), REST, Glue, ...

With nothing configured it is the SQL catalog at ``DSV_ICEBERG_CATALOG_URL`` over ``DSV_ICEBERG_WAREHOUSE`` (the embedded
default: SQLite under the home). A catalog name and properties (platform.yaml ``catalog:``, ``DSV_CATALOG_*``) go to
pyiceberg's ``load_catalog`` over pyiceberg's own configuration of that name (``.pyiceberg.yaml``); docs/iceberg.md.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.utils.config import Config, merge_config

from dsv_platform.core.errors import EnvironmentSetupError, is_secret

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


DEFAULT_NAME = "dsv"
_SQL_SCHEMES = ("sqlite", "postgresql")


def resolved_properties(
    name: str | None, properties: Mapping[str, str], *, sql_url: str, warehouse: str, s3_region: str = "us-east-1", s3_endpoint_url: str | None = None
) -> tuple[str, dict[str, str]]:
    """The catalog name and the properties ``load_catalog`` gets: pyiceberg's configuration of ``name``, then ``properties``.

    Without a ``type``, ``uri`` or ``py-catalog-impl`` anywhere, the SQL catalog at ``sql_url``; a SQL catalog
    without a ``warehouse`` gets ``warehouse`` (a local folder as a file URI); an ``s3://`` warehouse without an
    endpoint or region gets ``DSV_S3_*``'s.
    """
    name = name or DEFAULT_NAME
    conf = {str(k): str(v) for k, v in merge_config(Config().get_catalog_config(name) or {}, dict(properties)).items() if not isinstance(v, dict)}
    if not {"type", "uri", "py-catalog-impl"} & conf.keys():
        conf |= {"type": "sql", "uri": sql_url}
    if _is_sql(conf):
        conf["warehouse"] = catalog_properties(conf["uri"], conf.get("warehouse", warehouse))["warehouse"]
    if conf.get("warehouse", "").startswith("s3://"):
        conf.setdefault("s3.region", s3_region)
        if s3_endpoint_url:
            conf.setdefault("s3.endpoint", s3_endpoint_url)
    return name, conf


def _is_sql(conf: Mapping[str, str]) -> bool:
    return conf.get("type", "").lower() == "sql" or ("type" not in conf and conf.get("uri", "").startswith(_SQL_SCHEMES))


def build_catalog(
    catalog_url: str, warehouse: str, *, name: str | None = None, properties: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None,
    **options: Any,
) -> Catalog:  # fmt: skip
    """The catalog :func:`resolved_properties` names, from pyiceberg's ``load_catalog`` (``options``: the S3 region and endpoint).

    A SQLite catalog whose tables live under another folder was moved or copied: when that folder is gone (moved) its
    tables are relocated here (iceberg_relocate.py); when it is still there (a copy, or moved with the original kept),
    it is refused, one line naming both places and ``dsv home relocate``, so a copy never writes into the original.
    """
    name, props = resolved_properties(name, {**(properties or {}), **(extra or {})}, sql_url=catalog_url, warehouse=warehouse, **options)
    local = urlparse(props.get("warehouse", ""))
    here = unquote(local.path)
    origin = moved_from(props["uri"], here) if _is_sql(props) and local.scheme == "file" else None
    if origin is not None and Path(unquote(origin)).exists():
        raise EnvironmentSetupError(
            f"warehouse {Path(here).resolve()}: its Iceberg catalog names tables under {unquote(origin)} (the home was moved or copied); "
            f"run `dsv home relocate` to make this home's tables its own (the original is not touched)"
        )
    if origin is not None:
        from dsv_platform.adapters.iceberg.iceberg_relocate import relocate_catalog  # here: it imports pyiceberg's Avro writers

        moved = relocate_catalog(props["uri"], here)
        if moved:
            log.warning("warehouse %s: relocated %d table(s) from %s (the home was moved)", Path(here).resolve(), len(moved), unquote(origin))
    try:
        return _load(name, props)
    except Exception as exc:  # a URL it cannot parse, a missing driver, a server not there (sqlalchemy's errors: not imported here)
        if not isinstance(exc, (ValueError, ImportError, OSError)) and not type(exc).__module__.startswith("sqlalchemy"):
            raise
        what = "DSV_ICEBERG_CATALOG_URL: not a usable catalog URL" if props.get("uri") == catalog_url else f"Iceberg catalog {name!r}: not usable"
        first = (str(exc).strip().splitlines() or [""])[0]
        raise EnvironmentSetupError(f"{what} ({type(exc).__name__}: {_redacted(first, props)})") from exc


CREATION_ATTEMPTS = 5


def _load(name: str, props: Mapping[str, str]) -> Catalog:
    """``load_catalog`` (a SQL catalog: sql_catalog.SqlCatalog); one that lost the race to create its tables in a new database is opened again.

    pyiceberg creates the catalog's tables when they are absent (check, then ``CREATE TABLE``): processes starting together
    on a new PostgreSQL database (Celery workers, a webserver and a daemon) race, and the losers fail with a duplicate
    ``pg_type`` row or ``already exists``. Once the winner committed the tables exist and a new attempt just opens them.
    """
    sql = _is_sql(props) and "py-catalog-impl" not in props
    attempt = 1
    while True:
        try:
            if sql:  # what load_catalog builds for a SQL catalog, with its metadata files parsed once (sql_catalog.py)
                from dsv_platform.adapters.iceberg.sql_catalog import SqlCatalog

                return SqlCatalog(name, **props)
            return load_catalog(name, **props)
        except Exception as exc:
            if attempt == CREATION_ATTEMPTS or not (_is_sql(props) and _lost_creation_race(exc)):
                raise
        time.sleep(0.05 * attempt)
        attempt += 1


def _lost_creation_race(exc: Exception) -> bool:
    text = str(exc)
    return type(exc).__module__.startswith("sqlalchemy") and ("pg_type_typname_nsp_index" in text or "already exists" in text)


def _redacted(text: str, props: Mapping[str, str]) -> str:
    """``text`` with every catalog property value that looks like a credential replaced by ``***`` (errors never carry one)."""
    for key, value in props.items():
        if value and is_secret(key, value):
            text = text.replace(value, "***")
    return text


__all__ = ["DEFAULT_NAME", "build_catalog", "catalog_properties", "moved_from", "resolved_properties"]
