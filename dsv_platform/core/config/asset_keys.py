"""The asset keys of the Dagster catalog: multi-part, mirroring the tables. The one place a key is formed.

``raw/<source>``, ``canonical/<source>`` and its observed ``canonical/<source>/head``, ``datasets/<name>/<version>``
and ``.../splits``, ``labels/<name>``, ``models/<name>``, ``artifacts/<name>``: each component a Dagster name. The
Dagster layer makes them ``AssetKey`` values (defs/keys.py); services use the ``/``-joined user string. Job names
did not change. :func:`legacy_name` is the flat key a path had before (``raw_<source>``, ``<name>_<version>_snapshot``,
...), so a reader of an upgraded instance's history still finds it. Details: docs/configuration.md, "Asset keys".
"""

import re
from collections.abc import Callable
from pathlib import Path as FilePath

from dsv_platform.core.config_yaml import ConfigError

RAW, CANONICAL, HEAD, DATASETS, SPLITS, LABELS, MODELS, ARTIFACTS = "raw", "canonical", "head", "datasets", "splits", "labels", "models", "artifacts"
_COMPONENT = re.compile(r"^[A-Za-z0-9_]+\Z")

Path = tuple[str, ...]


def component(value: str, what: str, *, file: str | FilePath | None = None) -> str:
    """``value`` if it can be one component of an asset key (a Dagster name), else a :class:`ConfigError` naming it."""
    if not _COMPONENT.match(value):
        raise ConfigError(f"{what} {value!r} cannot be part of a Dagster asset key: use letters, digits and underscores only", file=file, key=what)
    return value


def raw(source: str) -> Path:
    return (RAW, component(source, "source"))


def canonical(source: str) -> Path:
    return (CANONICAL, component(source, "source"))


def head(source: str) -> Path:
    return (*canonical(source), HEAD)


def snapshot(name: str, version: str) -> Path:
    return (DATASETS, component(name, "dataset name"), component(version, "version"))


def splits(name: str, version: str) -> Path:
    return (*snapshot(name, version), SPLITS)


def label(name: str) -> Path:
    return (LABELS, component(name, "label"))


def model(name: str) -> Path:
    return (MODELS, component(name, "model"))


def artifact(name: str) -> Path:
    return (ARTIFACTS, component(name, "artifact"))


def user_string(path: Path) -> str:
    """``raw/transactions``: how the UI, ``dagster asset`` and selection strings name the key."""
    return "/".join(path)


def user_string_of(make: Callable[..., Path], *names: str) -> str | None:
    """``user_string(make(*names))``, or None when a name cannot be a key component (no asset can have that key)."""
    try:
        return user_string(make(*names))
    except ConfigError:
        return None


def op_name(path: Path) -> str:
    """The name Dagster gives the step (and the ``ops:`` key of run config) of a single asset: ``raw__transactions``."""
    return "__".join(path)


def legacy_name(path: Path) -> str | None:
    """The flat key ``path`` had before multi-part keys (None for a path that had none)."""
    match path:
        case (kind, source) if kind in (RAW, CANONICAL):
            return f"{kind}_{source}"
        case (kind, source, last) if (kind, last) == (CANONICAL, HEAD):
            return f"{CANONICAL}_{source}_{HEAD}"
        case (kind, name, version) if kind == DATASETS:
            return f"{name}_{version}_snapshot"
        case (kind, name, version, last) if (kind, last) == (DATASETS, SPLITS):
            return f"{name}_{version}_{SPLITS}"
        case (kind, name) if kind == LABELS:
            return f"{LABELS}_{name}"
        case (kind, name) if kind in (MODELS, ARTIFACTS):
            return name
    return None


__all__ = [
    "ARTIFACTS", "CANONICAL", "DATASETS", "HEAD", "LABELS", "MODELS", "RAW", "SPLITS", "Path", "artifact", "canonical", "component", "head", "label",
    "legacy_name", "model", "op_name", "raw", "snapshot", "splits", "user_string", "user_string_of",
]  # fmt: skip
