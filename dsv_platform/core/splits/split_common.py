"""Shared pieces of the split policies (see :mod:`dsv_platform.core.splits.policy`).

Policy names and constants, named bucket ranges and their checks, the exact-keys
check of policy documents, the assignment result, UTC instant text, and what the
protocol of :mod:`dsv_platform.core.splits.policy` shares: the kind of column a
policy reads, a policy's named check, and configuration errors naming their key.
"""

from __future__ import annotations

import contextlib
import enum
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import SplitPolicyError

if TYPE_CHECKING:  # annotations only: loading a split policy needs no pyarrow
    import pyarrow as pa

    from dsv_platform.core.splits.split_checks import CheckReport

HASH_SPLIT = "hash-split/1"
GROUP_SPLIT = "group-split/1"
TIME_SPLIT = "time-split/1"
SEEDED_RANDOM = "seeded-random/1"
ALGORITHM = "sha256"
IDENTIFIER_ENCODING = "str:nfc-utf8,int:base10-ascii"
MAX_MODULUS = 2**31  # keeps Horner's rule inside uint64
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


class SplitName(str, enum.Enum):
    """The conventional split names (hash and seeded policies accept any valid name)."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"


@dataclass(frozen=True)
class SplitRange:
    """A named bucket range ``[previous upper, upper)``."""

    name: str
    upper: int


def parse_bounds(text: str) -> tuple[SplitRange, ...]:
    """``"train=80,validation=90,test=100"`` -> ranges; raises SplitPolicyError naming the bad item."""
    ranges = []
    for item in text.split(","):
        name, sep, bound = item.strip().partition("=")
        if not sep or not bound.strip().isdigit():
            raise SplitPolicyError(f"split bound {item!r} in {text!r} is not NAME=INTEGER (e.g. train=80,validation=90,test=100)")
        ranges.append(SplitRange(name.strip(), int(bound)))
    return tuple(ranges)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_ranges(ranges: Sequence[SplitRange], modulus: int) -> None:
    if not is_int(modulus) or not 1 <= modulus <= MAX_MODULUS:
        raise SplitPolicyError(f"modulus {modulus!r} must be an integer between 1 and {MAX_MODULUS}")
    if not ranges:
        raise SplitPolicyError("a split policy needs at least one named range")
    previous, seen = 0, set[str]()
    for r in ranges:
        if not isinstance(r.name, str) or not _NAME.match(r.name):
            raise SplitPolicyError(f"split name {r.name!r} must match [A-Za-z][A-Za-z0-9_-]*")
        if r.name in seen:
            raise SplitPolicyError(f"split name {r.name!r} appears twice; names must be unique")
        if not is_int(r.upper) or r.upper <= previous:
            raise SplitPolicyError(f"bound {r.name}={r.upper!r} must be an integer greater than the previous bound {previous}")
        previous, seen = r.upper, seen | {r.name}
    if previous != modulus:
        raise SplitPolicyError(f"last bound {ranges[-1].name}={previous} must equal the modulus {modulus}")


def document_fields(doc: Any, policy: str, keys: set[str]) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping) or doc.get("policy") != policy:
        raise SplitPolicyError(f"not a {policy} document: {doc!r}")
    if set(doc) != keys | {"policy"}:
        raise SplitPolicyError(f"{policy} document keys {sorted(doc)} must be exactly {sorted(keys | {'policy'})}")
    return doc


@dataclass(frozen=True)
class SplitAssignment:
    """Split names (dictionary-encoded) and, for hash-based policies, bucket numbers."""

    splits: pa.DictionaryArray
    buckets: pa.Array | None


def utc_text(moment: datetime) -> str:
    """ISO 8601 UTC text with ``Z`` (microseconds only when non-zero)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_utc(value: datetime | str, what: str) -> datetime:
    """A timezone-aware instant (in UTC) from a datetime or ISO 8601 text; naive values are errors."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise SplitPolicyError(f"{what} {value!r} is not an ISO 8601 timestamp") from exc
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise SplitPolicyError(f"{what} {value!r} must be a timezone-aware timestamp (e.g. 2026-01-01T00:00:00Z)")
    return value.astimezone(UTC)


class ColumnNeed(str, enum.Enum):
    """What the column a policy reads must hold (a configuration checks it against the output contract)."""

    IDENTIFIER = "identifier"  # strings or integers, never null
    TIME = "time"  # timezone-aware timestamps, never null


class CheckTally(Protocol):
    """A policy's rule checked on an assignment fed batch by batch in row order; its report once every batch is in."""

    name: str
    blocking: bool

    def add(self, table: pa.Table) -> None: ...

    def report(self) -> CheckReport: ...


@dataclass(frozen=True)
class PolicyCheck:
    """One rule of a policy checked on an assignment: a build gate named ``name``."""

    name: str
    report: CheckReport
    blocking: bool = True


def recorded_input_column(recorded: str | None, id_column: str | None) -> str | None:
    """The column a policy that records its column reads; ``id_column``, if given, must be that column."""
    if id_column is not None and id_column != recorded:
        raise SplitPolicyError(f"id_column {id_column!r} differs from the column {recorded!r} the policy records")
    return recorded


def config_fields(raw: Mapping[str, Any], *, file: str | Path, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
    """``split_policy`` carrying only ``allowed`` keys (``policy`` always) and every ``required`` one."""
    unknown = sorted(str(k) for k in raw if k not in allowed | {"policy"})
    if unknown:
        raise ConfigError(f"unknown key for {raw.get('policy')}; allowed: {sorted(allowed | {'policy'})}", file=file, key=f"split_policy.{unknown[0]}")
    missing = sorted(k for k in required if k not in raw)
    if missing:
        raise ConfigError(f"is required by {raw.get('policy')}", file=file, key=f"split_policy.{missing[0]}")
    return raw


@contextlib.contextmanager
def config_key(file: str | Path, key: str) -> Iterator[None]:
    """A SplitPolicyError (or a missing/mistyped value) raised inside becomes a ConfigError naming ``file`` and ``split_policy.<key>``."""
    try:
        yield
    except (SplitPolicyError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"bad split policy ({exc})", file=file, key=f"split_policy.{key}" if key else "split_policy") from exc


def config_text(raw: Mapping[str, Any], key: str, *, file: str | Path) -> str:
    """``raw[key]`` as a non-empty string (a number is read as its text, as configurations always have been)."""
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ConfigError(f"must be a non-empty string, got {value!r}", file=file, key=f"split_policy.{key}")
    return str(value)
