"""Canonical JSON (docs/canonical-encoding.md): the bytes every identity is a hash of.

UTF-8, object keys sorted by code point, no insignificant white space, no
floats, strings with the minimal JSON escapes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dsv_platform.core.errors import DsvError


class CanonicalJsonError(DsvError):
    """A value cannot be written as canonical JSON (a float, a non-string key, ...)."""


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        raise CanonicalJsonError(f"{path}: floats are not allowed in canonical JSON (got {value!r}); use a string or an integer")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJsonError(f"{path}: object keys must be strings (got {key!r})")
            _check(item, f"{path}.{key}")
        return
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    raise CanonicalJsonError(f"{path}: {type(value).__name__} cannot be written as canonical JSON ({value!r})")


def _sort_key(item: tuple[str, Any]) -> list[int]:
    # Code point order (Python's str order is code point order already; UTF-16
    # order, which JCS uses, would differ for astral characters).
    return [ord(ch) for ch in item[0]]


def _normalize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _normalize(v) for k, v in sorted(value.items(), key=_sort_key)}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes of ``value``; raises :class:`CanonicalJsonError` on floats and other non-JSON values."""
    _check(value, "$")
    text = json.dumps(_normalize(value), ensure_ascii=False, separators=(",", ":"), sort_keys=False, allow_nan=False)
    return text.encode("utf-8")


def sha256_hex(value: Any) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of ``value``."""
    return hashlib.sha256(dumps(value)).hexdigest()
