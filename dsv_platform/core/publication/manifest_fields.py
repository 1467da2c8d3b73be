"""Value checks shared by the manifest and its entries (see :mod:`dsv_platform.core.publication.manifest`).

Each check raises :class:`ManifestError` naming the field; ``freeze``/``thaw`` turn
nested documents into read-only values and back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from dsv_platform.core.errors import PublicationError

_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")
EMPTY: Mapping[str, Any] = MappingProxyType({})


class ManifestError(PublicationError):
    """A manifest or manifest document breaks the manifest rules (bad hash, missing key, wrong totals, ...)."""


def freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def check_hex(value: object, what: str) -> str:
    if not isinstance(value, str) or not _HEX64.match(value):
        raise ManifestError(f"{what} must be 64 lowercase hex digits (a SHA-256), got {value!r}")
    return value


def check_int(value: object, what: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ManifestError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def check_str(value: object, what: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{what} must be a non-empty string, got {value!r}")
    return value


def scalar_map(value: object, what: str) -> Mapping[str, str | int]:
    if not isinstance(value, Mapping):
        raise ManifestError(f"{what} must be an object of string or integer values, got {value!r}")
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ManifestError(f"{what}[{k!r}] must be a string or an integer, got {v!r}")
    return MappingProxyType(dict(value))


def exact_keys(doc: object, what: str, expected: Iterable[str]) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{what} must be an object, got {type(doc).__name__}")
    want = set(expected)
    missing, unknown = sorted(want - set(doc)), sorted(set(doc) - want)
    if missing or unknown:
        raise ManifestError(f"{what}: missing keys {missing}, unknown keys {unknown} (the manifest format has exactly {sorted(want)})")
    return doc
