"""Strict YAML reading for the configuration folder, and its one-line error.

Configuration mistakes must surface at load time as one line naming the file
and the key, so YAML is read with a loader that refuses duplicate keys and
every mapping is checked against the keys it may and must carry.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from yaml.nodes import MappingNode

from dsv_platform.core.errors import ConfigurationError


class ConfigError(ConfigurationError):
    """A configuration file is wrong: one line naming the file and the key (CLI exit code 2)."""

    def __init__(self, message: str, *, file: str | Path | None = None, key: str | None = None) -> None:
        where = [str(file)] if file else []
        if key:
            where.append(f"key {key!r}")
        text = " ".join(str(message).split())
        super().__init__(f"{': '.join(where)}: {text}" if where else text)
        self.file = str(file) if file else None
        self.key = key


if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:  # libyaml's parser where PyYAML was built with it: a configuration folder read in 7 ms instead of 42
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SafeLoader):
    """A SafeLoader (libyaml's parser when present) that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r} on line {line} (first on line {seen[key]})", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.2 booleans only: ``on``, ``off``, ``yes`` and ``no`` stay strings (``on:`` is a join key).
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


def _duplicate_key(exc: yaml.YAMLError) -> str | None:
    problem = getattr(exc, "problem", None)
    return problem if isinstance(problem, str) and problem.startswith("duplicate key") else None


def read_yaml(path: Path) -> Any:
    """The parsed document of ``path``; unreadable, non-UTF-8, invalid or duplicate-key YAML is a ConfigError."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=path) from exc
    try:
        return yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError as exc:
        dup = _duplicate_key(exc)
        if dup is not None:
            raise ConfigError(dup, file=path, key=dup.split("'")[1] if "'" in dup else None) from exc
        if "maximum nesting depth" in str(getattr(exc, "problem", None)):  # libyaml's limit: as deep a file as below
            raise ConfigError("not valid YAML: nested too deeply", file=path) from exc
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}", file=path) from exc
    except ValueError as exc:  # an unquoted value that looks like a date but is none (2026-13-01)
        raise ConfigError(f"not valid YAML: {exc} (quote a date that is not one)", file=path) from exc
    except RecursionError as exc:  # a hostile or broken file nested deeper than the parser's stack
        raise ConfigError("not valid YAML: nested too deeply", file=path) from exc


def check_keys(doc: Any, *, file: str | Path, where: str | None, allowed: Collection[str], required: Collection[str] = ()) -> Mapping[str, Any]:
    """``doc`` as a mapping carrying no unknown key and every required one (``where`` prefixes the key path)."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"must be a mapping, got {type(doc).__name__}", file=file, key=where)
    prefix = f"{where}." if where else ""
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise ConfigError(f"unknown key; allowed: {sorted(allowed)}", file=file, key=prefix + unknown[0])
    missing = [k for k in sorted(required) if k not in doc]
    if missing:
        raise ConfigError("is required", file=file, key=prefix + missing[0])
    return doc


_KIND_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    dict: "a mapping",
}


def need(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], *, file: str | Path, where: str | None = None) -> Any:
    """``doc[key]`` checked to be of ``kind`` (a bool is never an int)."""
    path = f"{where}.{key}" if where else key
    if key not in doc:
        raise ConfigError("is required", file=file, key=path)
    value = doc[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)
        raise ConfigError(f"must be {names}, got {value!r}", file=file, key=path)
    return value


def names_list(doc: Mapping[str, Any], key: str, *, file: str | Path, where: str | None = None) -> tuple[str, ...]:
    """``doc[key]`` as a non-empty list of strings (a single string counts as a list of one)."""
    value = doc.get(key)
    path = f"{where}.{key}" if where else key
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"must be a non-empty list of names, got {value!r}", file=file, key=path)
    return tuple(value)


__all__ = ["ConfigError", "StrictLoader", "check_keys", "names_list", "need", "read_yaml"]
