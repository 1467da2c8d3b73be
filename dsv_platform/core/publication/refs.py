"""Dataset references: ``name:version``, ``name:version@sha256:<hex>``, ``name:version@<alias>``.

``parse_ref`` accepts the whole string or nothing; ``str(ref)`` writes the canonical
text back, so ``parse_ref(str(ref)) == ref``.

Details: docs/publication.md
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsv_platform.core.errors import ReferenceSyntaxError

HASH_PREFIX = "sha256:"
NAME_PATTERN = re.compile(r"[a-z0-9_][a-z0-9_.-]*\Z")
VERSION_PATTERN = re.compile(r"[A-Za-z0-9_.-]+\Z")
ALIAS_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
HEX64_PATTERN = re.compile(r"[0-9a-f]{64}\Z")
_EXAMPLE = "e.g. fraud_training_set:v6, fraud_training_set:v6@sha256:<64 lowercase hex>, fraud_training_set:v6@production"


def _fail(text: str, problem: str) -> ReferenceSyntaxError:
    return ReferenceSyntaxError(f"dataset reference {text!r}: {problem} ({_EXAMPLE})")


def _check_hash(text: str, digits: str) -> None:
    if HEX64_PATTERN.match(digits):
        return
    if re.fullmatch(r"[0-9a-fA-F]{64}", digits):
        raise _fail(text, f"manifest hash {digits!r} has uppercase hex digits; write it in lowercase")
    bad = sorted({c for c in digits if c not in "0123456789abcdefABCDEF"})
    if bad:
        raise _fail(text, f"manifest hash {digits!r} has non-hex characters {''.join(bad)!r}")
    raise _fail(text, f"manifest hash {digits!r} has {len(digits)} hex digits; a SHA-256 has 64")


def _check_part(text: str, what: str, value: str, pattern: re.Pattern[str], rule: str) -> None:
    if not value:
        raise _fail(text, f"empty {what}")
    if not pattern.match(value):
        raise _fail(text, f"{what} {value!r} must match {rule}")


@dataclass(frozen=True)
class DatasetRef:
    """A parsed reference; at most one of ``manifest_hash`` (64 lowercase hex) and ``alias`` is set."""

    name: str
    version: str
    manifest_hash: str | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        text = _format(self)
        _check_part(text, "name", self.name, NAME_PATTERN, "[a-z0-9_][a-z0-9_.-]*")
        _check_part(text, "version", self.version, VERSION_PATTERN, "[A-Za-z0-9_.-]+")
        if self.manifest_hash is not None and self.alias is not None:
            raise _fail(text, "a reference pins either a manifest hash or an alias, not both")
        if self.manifest_hash is not None:
            _check_hash(text, self.manifest_hash)
        if self.alias is not None:
            _check_part(text, "alias", self.alias, ALIAS_PATTERN, "[A-Za-z][A-Za-z0-9_.-]*")
            if self.alias == HASH_PREFIX[:-1]:
                raise _fail(text, "'@sha256' needs ':' and the 64 hex digits of the manifest hash")

    @classmethod
    def parse(cls, text: str) -> DatasetRef:
        return parse_ref(text)

    @property
    def is_pinned(self) -> bool:
        """True when the reference names one realization by its manifest hash."""
        return self.manifest_hash is not None

    def __str__(self) -> str:
        return _format(self)


def _format(ref: DatasetRef) -> str:
    text = f"{ref.name}:{ref.version}"
    if ref.manifest_hash is not None:
        return f"{text}@{HASH_PREFIX}{ref.manifest_hash}"
    return f"{text}@{ref.alias}" if ref.alias is not None else text


def parse_ref(text: str) -> DatasetRef:
    """Parse a reference; a malformed one raises ReferenceSyntaxError naming the string and the problem."""
    if not isinstance(text, str):
        raise ReferenceSyntaxError(f"dataset reference {text!r} is a {type(text).__name__}, not a string")
    if not text:
        raise _fail(text, "empty reference")
    if any(c.isspace() for c in text):
        raise _fail(text, "white space is not allowed")
    name, colon, rest = text.partition(":")
    if not colon:
        raise _fail(text, "no ':' between name and version")
    _check_part(text, "name", name, NAME_PATTERN, "[a-z0-9_][a-z0-9_.-]*")
    version, at, suffix = rest.partition("@")
    _check_part(text, "version", version, VERSION_PATTERN, "[A-Za-z0-9_.-]+")
    if not at:
        return DatasetRef(name, version)
    if not suffix:
        raise _fail(text, "nothing after '@'; expected sha256:<64 hex> or an alias")
    if suffix.startswith(HASH_PREFIX):
        _check_hash(text, suffix[len(HASH_PREFIX) :])
        return DatasetRef(name, version, manifest_hash=suffix[len(HASH_PREFIX) :])
    if ":" in suffix:
        algorithm = suffix.partition(":")[0]
        raise _fail(text, f"unsupported digest {algorithm!r}; only sha256:<64 lowercase hex> is accepted")
    return DatasetRef(name, version, alias=suffix)
