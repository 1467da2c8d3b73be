"""``platform.yaml``: the optional platform-wide options of a configuration folder.

Keys: ``partitions: {start: YYYY-MM-DD}`` (the first day of the daily raw and
canonical partitions), ``dagster_modules: [module, ...]`` (modules exposing
``definitions(config) -> dagster.Definitions``, merged into the platform's)
and ``demo: module`` (a module exposing ``main(argv) -> int``, run by
``dsv demo``), ``executor: NAME`` or ``{name: NAME, config: {...}}`` (how Dagster
runs the steps of every job; docs/scaling-out.md), ``catalog: {name, type, uri, ...}`` (the
pyiceberg catalog, no credentials; docs/iceberg.md), ``model_governance:`` (what a privacy deletion obliges
per model family; core.config.model_governance). Only the names are checked here.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsv_platform.core.config.model_governance import ModelGovernance, parse_model_governance
from dsv_platform.core.config_yaml import ConfigError, check_keys, read_yaml
from dsv_platform.core.errors import is_secret
from dsv_platform.core.publication.approval import DEFAULT_PROTECTED_ALIASES
from dsv_platform.core.publication.refs import ALIAS_PATTERN
from dsv_platform.core.retention.policy import GcPolicy, parse_gc_policy

PLATFORM_FILE = "platform.yaml"
PLATFORM_KEYS = frozenset({"partitions", "dagster_modules", "demo", "executor", "protected_aliases", "gc", "catalog", "model_governance"})
EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")
EXECUTOR_KEYS = frozenset({"name", "config"})
PARTITION_KEYS = frozenset({"start"})
DEFAULT_PARTITIONS_START = dt.date(2020, 1, 1)
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


@dataclass(frozen=True)
class PlatformOptions:
    """What ``platform.yaml`` sets (every key optional)."""

    partitions_start: dt.date = DEFAULT_PARTITIONS_START
    dagster_modules: tuple[str, ...] = ()
    demo: str | None = None
    executor: str | None = None
    """One of :data:`EXECUTORS`; None: Dagster's default (multiprocess, in process for ``materialize``)."""
    executor_config: dict[str, Any] | None = None
    """The executor's Dagster config (None: the defaults documented in docs/scaling-out.md)."""
    protected_aliases: tuple[str, ...] = DEFAULT_PROTECTED_ALIASES
    """Aliases that may point only to ELIGIBLE (approved) realizations (core.approval; default ``[production]``)."""
    gc: GcPolicy = field(default_factory=GcPolicy)
    """``gc: {safety_window_hours, keep_heads}``: the one GC policy (core/retention/policy.py)."""
    catalog_name: str | None = None
    """``catalog.name``: the pyiceberg catalog to load (None: ``DSV_CATALOG_NAME``, else ``dsv``)."""
    catalog: tuple[tuple[str, str], ...] = ()
    """The other ``catalog:`` keys: pyiceberg catalog properties (``DSV_CATALOG_*`` override them)."""
    model_governance: ModelGovernance = field(default_factory=ModelGovernance)
    """Per model family, what a privacy deletion obliges (default ``retrain_required``: fail closed)."""


def _catalog(doc: Any, file: Path) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """``catalog:``: a mapping of property names to strings, numbers or booleans; a credential is refused (it belongs in the environment)."""
    if not isinstance(doc, dict):
        raise ConfigError(f"must be a mapping of pyiceberg catalog properties, got {doc!r}", file=file, key="catalog")
    props: dict[str, str] = {}
    for key, value in doc.items():
        if not isinstance(key, str) or isinstance(value, (dict, list)) or value is None:
            raise ConfigError(f"must be a string, number or boolean, got {value!r}", file=file, key=f"catalog.{key}")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if is_secret(key, text):
            raise ConfigError("is a credential: set it in the environment (DSV_CATALOG_*), not in platform.yaml", file=file, key=f"catalog.{key}")
        props[key] = text
    name = props.pop("name", None)
    return name, tuple(sorted(props.items()))


def _executor(doc: Any, file: Path) -> tuple[str, dict[str, Any] | None]:
    spec = {"name": doc} if isinstance(doc, str) else check_keys(doc, file=file, where="executor", allowed=EXECUTOR_KEYS, required=("name",))
    name, config = spec["name"], spec.get("config")
    if name not in EXECUTORS:
        raise ConfigError(f"must be one of {', '.join(EXECUTORS)}, got {name!r}", file=file, key="executor.name" if isinstance(doc, dict) else "executor")
    if config is not None and not isinstance(config, dict):
        raise ConfigError(f"must be a mapping of the executor's Dagster config, got {config!r}", file=file, key="executor.config")
    for where in _credentials(config, "executor.config", ""):
        raise ConfigError(
            "is a credential written in platform.yaml (committed, baked into the image): give it as {env: VARIABLE}, read when a run starts",
            file=file,
            key=where,
        )
    return name, config


def _credentials(value: Any, path: str, key: str) -> Iterator[str]:
    """Where a literal credential sits in an executor config: a URL with a password, or a string under a password/token/secret key.

    Dagster's ``{env: VARIABLE}`` is the way to give one; a list of Kubernetes secret names (``env_secrets``,
    ``image_pull_secrets``) names secrets, it holds none.
    """
    if isinstance(value, dict):
        if set(value) != {"env"}:
            for k, v in value.items():
                yield from _credentials(v, f"{path}.{k}", str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _credentials(v, f"{path}[{i}]", "")
    elif isinstance(value, str) and is_secret("" if key.endswith("secrets") else key, value):
        yield path


def _protected(value: Any, file: Path) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list):
        raise ConfigError(f"must be a list of alias names, got {value!r}", file=file, key="protected_aliases")
    for i, name in enumerate(value):
        if not isinstance(name, str) or not ALIAS_PATTERN.match(name) or name == "sha256":
            raise ConfigError(f"must be an alias name matching [A-Za-z][A-Za-z0-9_.-]*, got {name!r}", file=file, key=f"protected_aliases[{i}]")
    return tuple(dict.fromkeys(value))


def _module(value: Any, *, file: Path, key: str) -> str:
    if not isinstance(value, str) or not _MODULE.match(value):
        raise ConfigError(f"must be a dotted Python module name, got {value!r}", file=file, key=key)
    return value


def _start(doc: Any, file: Path) -> dt.date:
    raw = check_keys(doc, file=file, where="partitions", allowed=PARTITION_KEYS, required=("start",))["start"]
    if isinstance(raw, dt.date) and not isinstance(raw, dt.datetime):
        return raw
    try:
        return dt.date.fromisoformat(raw) if isinstance(raw, str) else _bad_start(raw, file)
    except ValueError:
        return _bad_start(raw, file)


def _bad_start(raw: Any, file: Path) -> dt.date:
    raise ConfigError(f"must be an ISO date YYYY-MM-DD, got {raw!r}", file=file, key="partitions.start")


def parse_options(doc: Any, *, file: Path) -> PlatformOptions:
    """:class:`PlatformOptions` from a ``platform.yaml`` document (None or empty: the defaults)."""
    if doc is None:
        return PlatformOptions()
    doc = check_keys(doc, file=file, where=None, allowed=PLATFORM_KEYS)
    modules = doc.get("dagster_modules", [])
    if isinstance(modules, str) or not isinstance(modules, list):
        raise ConfigError(f"must be a list of module names, got {modules!r}", file=file, key="dagster_modules")
    names = tuple(_module(m, file=file, key=f"dagster_modules[{i}]") for i, m in enumerate(modules))
    if len(set(names)) != len(names):
        raise ConfigError("lists a module twice", file=file, key="dagster_modules")
    executor, executor_config = _executor(doc["executor"], file) if "executor" in doc else (None, None)
    catalog_name, catalog = _catalog(doc["catalog"], file) if "catalog" in doc else (None, ())
    return PlatformOptions(
        partitions_start=_start(doc["partitions"], file) if "partitions" in doc else DEFAULT_PARTITIONS_START,
        dagster_modules=names,
        demo=_module(doc["demo"], file=file, key="demo") if "demo" in doc else None,
        executor=executor,
        executor_config=executor_config,
        protected_aliases=_protected(doc["protected_aliases"], file) if "protected_aliases" in doc else DEFAULT_PROTECTED_ALIASES,
        gc=parse_gc_policy(doc["gc"], file=file) if "gc" in doc else GcPolicy(),
        catalog_name=catalog_name,
        catalog=catalog,
        model_governance=parse_model_governance(doc["model_governance"], file=file) if "model_governance" in doc else ModelGovernance(),
    )


def load_options(folder: Path) -> PlatformOptions:
    """The options of ``folder/platform.yaml``, or the defaults when the file is absent."""
    path = folder / PLATFORM_FILE
    if (folder / "platform.yml").exists():
        raise ConfigError("configuration files end in .yaml", file=folder / "platform.yml")
    return parse_options(read_yaml(path), file=path) if path.exists() else PlatformOptions()
