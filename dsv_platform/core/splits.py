"""Split policies and their vectorized assignment (CANONICAL-ENCODING.md, `hash-split/1`).

Every policy is a frozen value with a canonical JSON document (``to_document``,
``policy_from_document``) whose SHA-256 is its ``policy_hash``; the document goes
into the manifest. ``hash-split/1``, for an identifier ``id``:

    bytes   = NFC(id).encode("utf-8") for strings, ASCII base 10 for integers
    bucket  = int.from_bytes(sha256(salt.encode() + b":" + bytes).digest(), "big") % modulus
    split   = first range (in order) whose cumulative upper bound is > bucket

Assignment is vectorized: messages are built with Arrow string kernels, only
non-ASCII identifiers are NFC-normalized in Python, the one unavoidable SHA-256
per identifier runs in a tight ``map`` with CPython's built-in SHA-256 (less
per-call overhead than OpenSSL's EVP for short messages; ``hashlib`` as
fallback), and the 256-bit digests are reduced modulo the modulus with numpy,
Horner's rule over four big-endian 64-bit words.
"""

from __future__ import annotations

import enum
import hashlib
import importlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import SplitPolicyError

HASH_SPLIT = "hash-split/1"
GROUP_SPLIT = "group-split/1"
TIME_SPLIT = "time-split/1"
SEEDED_RANDOM = "seeded-random/1"
ALGORITHM = "sha256"
IDENTIFIER_ENCODING = "str:nfc-utf8,int:base10-ascii"
MAX_MODULUS = 2**31  # keeps Horner's rule inside uint64
BATCH_ROWS = 1 << 18
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")


def _load_sha256() -> Callable[[bytes], Any]:
    for module in ("_sha256", "_sha2"):  # CPython 3.11 / 3.12+ built-in implementations
        try:
            ctor: Callable[[bytes], Any] = importlib.import_module(module).sha256
        except (ImportError, AttributeError):
            continue
        if ctor(b"abc").digest() == hashlib.sha256(b"abc").digest():
            return ctor
    return hashlib.sha256


_SHA256 = _load_sha256()
_DIGEST: Callable[[Any], bytes] = type(_SHA256(b"")).digest


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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_ranges(ranges: Sequence[SplitRange], modulus: int) -> None:
    if not _is_int(modulus) or not 1 <= modulus <= MAX_MODULUS:
        raise SplitPolicyError(f"modulus {modulus!r} must be an integer between 1 and {MAX_MODULUS}")
    if not ranges:
        raise SplitPolicyError("a split policy needs at least one named range")
    previous, seen = 0, set()
    for r in ranges:
        if not isinstance(r.name, str) or not _NAME.match(r.name):
            raise SplitPolicyError(f"split name {r.name!r} must match [A-Za-z][A-Za-z0-9_-]*")
        if r.name in seen:
            raise SplitPolicyError(f"split name {r.name!r} appears twice; names must be unique")
        if not _is_int(r.upper) or r.upper <= previous:
            raise SplitPolicyError(f"bound {r.name}={r.upper!r} must be an integer greater than the previous bound {previous}")
        previous, seen = r.upper, seen | {r.name}
    if previous != modulus:
        raise SplitPolicyError(f"last bound {ranges[-1].name}={previous} must equal the modulus {modulus}")


def _fields(doc: Any, policy: str, keys: set[str]) -> Mapping[str, Any]:
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


@dataclass(frozen=True)
class HashSplitPolicy:
    """``hash-split/1``: salted SHA-256 bucket of the identifier, named by cumulative bounds."""

    salt: str
    ranges: tuple[SplitRange, ...]
    modulus: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.salt, str) or not self.salt:
            raise SplitPolicyError(f"salt {self.salt!r} must be a non-empty string")
        object.__setattr__(self, "ranges", tuple(self.ranges))
        _check_ranges(self.ranges, self.modulus)

    @classmethod
    def from_bounds(cls, salt: str, bounds: str | Mapping[str, int], modulus: int = 100) -> HashSplitPolicy:
        """From ``"train=80,validation=90,test=100"`` or an ordered mapping name -> upper bound."""
        ranges = parse_bounds(bounds) if isinstance(bounds, str) else tuple(SplitRange(k, v) for k, v in bounds.items())
        return cls(salt, ranges, modulus)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.ranges)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": HASH_SPLIT,
            "algorithm": ALGORITHM,
            "identifier_encoding": IDENTIFIER_ENCODING,
            "salt": self.salt,
            "modulus": self.modulus,
            "splits": [{"name": r.name, "upper": r.upper} for r in self.ranges],
        }

    @classmethod
    def from_document(cls, doc: Any) -> HashSplitPolicy:
        d = _fields(doc, HASH_SPLIT, {"algorithm", "identifier_encoding", "salt", "modulus", "splits"})
        if d["algorithm"] != ALGORITHM or d["identifier_encoding"] != IDENTIFIER_ENCODING:
            raise SplitPolicyError(f"unsupported algorithm/encoding {d['algorithm']!r}/{d['identifier_encoding']!r} in {HASH_SPLIT}")
        try:
            ranges = tuple(SplitRange(s["name"], s["upper"]) for s in d["splits"])
        except (KeyError, TypeError) as exc:
            raise SplitPolicyError(f"{HASH_SPLIT} splits {d['splits']!r} must be a list of {{name, upper}}") from exc
        return cls(d["salt"], ranges, d["modulus"])

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def bucket_of(self, identifier: str | int) -> int:
        """The bucket of one identifier, straight from the spec (the reference for the vector path)."""
        message = self.salt.encode("utf-8") + b":" + identifier_bytes(identifier)
        return int.from_bytes(hashlib.sha256(message).digest(), "big") % self.modulus

    def split_of(self, identifier: str | int) -> str:
        bucket = self.bucket_of(identifier)
        return next(r.name for r in self.ranges if bucket < r.upper)

    def buckets(self, values: Any) -> np.ndarray:
        """Bucket numbers (int64) of an Arrow array/chunked array, numpy array or sequence of identifiers."""
        arr = _as_identifier_array(values)
        if pa.types.is_dictionary(arr.type):
            if arr.null_count:
                raise SplitPolicyError(f"identifier at row {_first_null(arr)} is null; identifiers must be strings or integers")
            uniques = self.buckets(arr.dictionary)
            return uniques[arr.indices.to_numpy(zero_copy_only=False)]
        out = np.empty(len(arr), dtype=np.int64)
        prefix, nothing = pa.scalar(self.salt + ":", pa.large_string()), pa.scalar("", pa.large_string())
        for start in range(0, len(arr), BATCH_ROWS):
            text = _identifier_text(arr.slice(start, BATCH_ROWS), start)
            messages = pc.binary_join_element_wise(prefix, text, nothing).cast(pa.large_binary())
            digests = b"".join(map(_DIGEST, map(_SHA256, messages.to_numpy(zero_copy_only=False))))
            out[start : start + len(text)] = _reduce_digests(digests, self.modulus)
        return out

    def splits_of_buckets(self, buckets: np.ndarray) -> pa.DictionaryArray:
        uppers = np.array([r.upper for r in self.ranges], dtype=np.int64)
        indices = np.searchsorted(uppers, buckets, side="right").astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(self.names, pa.string()))

    def assign_values(self, values: Any) -> SplitAssignment:
        buckets = self.buckets(values)
        return SplitAssignment(self.splits_of_buckets(buckets), pa.array(buckets, pa.int64()))


def identifier_bytes(identifier: object) -> bytes:
    """``hash-split/1`` identifier bytes: NFC UTF-8 for strings, base-10 ASCII for integers."""
    if isinstance(identifier, str):
        return unicodedata.normalize("NFC", identifier).encode("utf-8")
    if _is_int(identifier):
        return str(identifier).encode("ascii")
    raise SplitPolicyError(f"identifier {identifier!r} is a {type(identifier).__name__}; hash-split/1 identifiers must be strings or integers")


def _first_null(arr: pa.Array) -> int:
    return int(np.flatnonzero(np.asarray(arr.is_null()))[0])


def _as_identifier_array(values: Any) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return pa.array([identifier_bytes(v).decode("utf-8") for v in _iterate(values)], pa.large_string())


def _iterate(values: Any) -> Iterable[Any]:
    return values.tolist() if isinstance(values, np.ndarray) else values


def _identifier_text(arr: pa.Array, offset: int) -> pa.Array:
    """Identifier texts (large_string, NFC) of one batch; ``offset`` is the batch's first row, for errors."""
    if arr.null_count:
        raise SplitPolicyError(f"identifier at row {offset + _first_null(arr)} is null; identifiers must be strings or integers")
    if pa.types.is_integer(arr.type):
        return pc.cast(arr, pa.large_string())
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type)):
        first = arr[0].as_py() if len(arr) else None
        raise SplitPolicyError(f"identifiers of type {arr.type} (first value {first!r}) are not strings or integers; hash-split/1 accepts only those")
    text = pc.cast(arr, pa.large_string())
    non_ascii = pc.invert(pc.string_is_ascii(text))
    if pc.any(non_ascii).as_py():
        originals = text.filter(non_ascii).to_pylist()
        normalized = [unicodedata.normalize("NFC", s) for s in originals]
        if normalized != originals:
            text = pc.replace_with_mask(text, non_ascii, pa.array(normalized, pa.large_string()))
    return text


def _reduce_digests(digests: bytes, modulus: int) -> np.ndarray:
    """Each 32-byte big-endian digest modulo ``modulus`` (<= 2**31), Horner's rule over 64-bit words."""
    words = np.frombuffer(digests, dtype=">u8").reshape(-1, 4).astype(np.uint64)
    m, radix = np.uint64(modulus), np.uint64(pow(2, 64, modulus))
    acc = words[:, 0] % m
    for j in range(1, 4):
        acc = (acc * radix + words[:, j] % m) % m
    return acc.astype(np.int64)


def utc_text(moment: datetime) -> str:
    """ISO 8601 UTC text with ``Z`` (microseconds only when non-zero)."""
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_utc(value: datetime | str, what: str) -> datetime:
    """A timezone-aware instant (in UTC) from a datetime or ISO 8601 text; naive values are errors."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise SplitPolicyError(f"{what} {value!r} is not an ISO 8601 timestamp") from exc
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise SplitPolicyError(f"{what} {value!r} must be a timezone-aware timestamp (e.g. 2026-01-01T00:00:00Z)")
    return value.astimezone(timezone.utc)


def _epoch_units_ceil(moment: datetime, unit: str) -> int:
    """The smallest count of ``unit`` since the epoch that is >= ``moment`` (so ``t < moment`` iff ``t < count``)."""
    micros = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // _MICROSECOND
    per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit]
    return -((-micros * per_second) // 10**6)


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1)


@dataclass(frozen=True)
class TimeSplitPolicy:
    """``time-split/1``: train where t < train_until, validation where t < validation_until, else test."""

    column: str
    train_until: datetime
    validation_until: datetime

    def __post_init__(self) -> None:
        train = parse_utc(self.train_until, "train_until")
        validation = parse_utc(self.validation_until, "validation_until")
        if validation < train:
            raise SplitPolicyError(f"validation_until {utc_text(validation)} is before train_until {utc_text(train)}")
        object.__setattr__(self, "train_until", train)
        object.__setattr__(self, "validation_until", validation)

    names = (SplitName.TRAIN.value, SplitName.VALIDATION.value, SplitName.TEST.value)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": TIME_SPLIT,
            "column": self.column,
            "train_until": utc_text(self.train_until),
            "validation_until": utc_text(self.validation_until),
        }

    @classmethod
    def from_document(cls, doc: Any) -> TimeSplitPolicy:
        d = _fields(doc, TIME_SPLIT, {"column", "train_until", "validation_until"})
        return cls(d["column"], parse_utc(d["train_until"], "train_until"), parse_utc(d["validation_until"], "validation_until"))

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def split_indices(self, times: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """0 train, 1 validation, 2 test for a timezone-aware timestamp column without nulls."""
        t = times.type
        if not pa.types.is_timestamp(t) or t.tz is None:
            raise SplitPolicyError(f"time split column {self.column!r} has type {t}; it must be a timezone-aware timestamp")
        if times.null_count:
            raise SplitPolicyError(f"time split column {self.column!r} holds {times.null_count} null timestamps")
        counts = np.asarray(pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False))
        bounds = np.array([_epoch_units_ceil(self.train_until, t.unit), _epoch_units_ceil(self.validation_until, t.unit)])
        return np.searchsorted(bounds, counts, side="right").astype(np.int32)

    def assign_values(self, times: pa.Array | pa.ChunkedArray) -> SplitAssignment:
        indices = pa.array(self.split_indices(times), pa.int32())
        return SplitAssignment(pa.DictionaryArray.from_arrays(indices, pa.array(self.names, pa.string())), None)


@dataclass(frozen=True)
class GroupSplitPolicy:
    """``group-split/1``: ``hash-split/1`` on a group key column, so whole groups share a split."""

    group_column: str
    hash_policy: HashSplitPolicy

    @property
    def names(self) -> tuple[str, ...]:
        return self.hash_policy.names

    def to_document(self) -> dict[str, Any]:
        return {"policy": GROUP_SPLIT, "group_column": self.group_column, "hash_split": self.hash_policy.to_document()}

    @classmethod
    def from_document(cls, doc: Any) -> GroupSplitPolicy:
        d = _fields(doc, GROUP_SPLIT, {"group_column", "hash_split"})
        return cls(d["group_column"], HashSplitPolicy.from_document(d["hash_split"]))

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def assign_values(self, groups: Any) -> SplitAssignment:
        arr = _as_identifier_array(groups)
        if not pa.types.is_dictionary(arr.type) and arr.null_count == 0:
            arr = pc.dictionary_encode(arr)  # one hash per distinct group
        return self.hash_policy.assign_values(arr)


@dataclass(frozen=True)
class SeededRandomSplitPolicy:
    """``seeded-random/1``: a counter-based draw, the same on every numpy/Python version.

    A row's draw is ``hash-split/1`` with salt ``"seeded-random/1:<seed>"`` and modulus
    ``sum(parts)`` applied to its key: the value of ``key_column``, or the row's
    position (0, 1, ...) when ``key_column`` is None (then the result depends on row order).
    """

    seed: int
    parts: tuple[SplitRange, ...]  # ``upper`` holds the split's share in parts, not a cumulative bound
    key_column: str | None = None

    def __post_init__(self) -> None:
        if not _is_int(self.seed) or self.seed < 0:
            raise SplitPolicyError(f"seed {self.seed!r} must be a non-negative integer")
        object.__setattr__(self, "parts", tuple(self.parts))
        if any(not _is_int(p.upper) or p.upper <= 0 for p in self.parts):
            raise SplitPolicyError(f"split parts {[(p.name, p.upper) for p in self.parts]} must be positive integers")
        _ = self.hash_policy  # building the equivalent hash policy validates the names and the total

    @classmethod
    def from_parts(cls, seed: int, parts: Mapping[str, int], key_column: str | None = None) -> SeededRandomSplitPolicy:
        return cls(seed, tuple(SplitRange(k, v) for k, v in parts.items()), key_column)

    @property
    def hash_policy(self) -> HashSplitPolicy:
        """The equivalent ``hash-split/1`` policy: salt ``seeded-random/1:<seed>``, cumulative parts."""
        cumulative = np.cumsum([p.upper for p in self.parts]).tolist() if self.parts else []
        ranges = tuple(SplitRange(p.name, int(c)) for p, c in zip(self.parts, cumulative))
        return HashSplitPolicy(f"{SEEDED_RANDOM}:{self.seed}", ranges, int(cumulative[-1]) if cumulative else 1)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parts)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": SEEDED_RANDOM,
            "algorithm": ALGORITHM,
            "seed": self.seed,
            "key_column": self.key_column,
            "parts": [{"name": p.name, "parts": p.upper} for p in self.parts],
        }

    @classmethod
    def from_document(cls, doc: Any) -> SeededRandomSplitPolicy:
        d = _fields(doc, SEEDED_RANDOM, {"algorithm", "seed", "key_column", "parts"})
        if d["algorithm"] != ALGORITHM:
            raise SplitPolicyError(f"unsupported algorithm {d['algorithm']!r} in {SEEDED_RANDOM}")
        try:
            parts = tuple(SplitRange(p["name"], p["parts"]) for p in d["parts"])
        except (KeyError, TypeError) as exc:
            raise SplitPolicyError(f"{SEEDED_RANDOM} parts {d['parts']!r} must be a list of {{name, parts}}") from exc
        return cls(d["seed"], parts, d["key_column"])

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def assign_values(self, keys: Any) -> SplitAssignment:
        return self.hash_policy.assign_values(keys)


SplitPolicy = HashSplitPolicy | GroupSplitPolicy | TimeSplitPolicy | SeededRandomSplitPolicy
_POLICIES: dict[str, Any] = {
    HASH_SPLIT: HashSplitPolicy,
    GROUP_SPLIT: GroupSplitPolicy,
    TIME_SPLIT: TimeSplitPolicy,
    SEEDED_RANDOM: SeededRandomSplitPolicy,
}


def policy_from_document(doc: Any) -> SplitPolicy:
    """Read any split policy back from its document; unknown policies are SplitPolicyError."""
    name = doc.get("policy") if isinstance(doc, Mapping) else None
    if name not in _POLICIES:
        raise SplitPolicyError(f"unknown split policy {name!r}; known: {sorted(_POLICIES)}")
    policy: SplitPolicy = _POLICIES[name].from_document(doc)
    return policy


def _recorded_column(policy: SplitPolicy) -> str | None:
    if isinstance(policy, GroupSplitPolicy):
        return policy.group_column
    if isinstance(policy, TimeSplitPolicy):
        return policy.column
    if isinstance(policy, SeededRandomSplitPolicy):
        return policy.key_column
    return None


def assign(table: pa.Table, policy: SplitPolicy, id_column: str | None = None, *, split_column: str = "split") -> pa.Table:
    """``table`` plus a string ``split_column`` (and an int64 ``bucket`` column for hash-based policies).

    ``id_column`` names the identifier column of a :class:`HashSplitPolicy`; the other
    policies record their column, and ``id_column``, if given, must match it.
    """
    recorded = _recorded_column(policy)
    if isinstance(policy, HashSplitPolicy):
        if id_column is None:
            raise SplitPolicyError(f"{HASH_SPLIT} needs an identifier column (id_column)")
    elif id_column is not None and id_column != recorded:
        raise SplitPolicyError(f"id_column {id_column!r} differs from the column {recorded!r} the policy records")
    column = id_column if isinstance(policy, HashSplitPolicy) else recorded
    added = [split_column] + (["bucket"] if not isinstance(policy, TimeSplitPolicy) else [])
    clashes = [n for n in added if n in table.column_names]
    if clashes:
        raise SplitPolicyError(f"table already has a column {clashes[0]!r}; pass another split_column or drop it")
    if column is None:
        values: Any = pa.array(np.arange(table.num_rows, dtype=np.int64))
    elif column not in table.column_names:
        raise SplitPolicyError(f"split column {column!r} is not in the table (columns: {table.column_names})")
    else:
        values = table.column(column)
    result = policy.assign_values(values)
    out = table.append_column(split_column, pc.cast(result.splits, pa.string()))
    return out if result.buckets is None else out.append_column("bucket", result.buckets)
