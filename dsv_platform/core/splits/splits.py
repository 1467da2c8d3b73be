"""Split policies and their assignment (CANONICAL-ENCODING.md, `hash-split/1`).

Every policy is a frozen value with a canonical JSON document whose SHA-256 is its
``policy_hash``; the document goes into the manifest. The vectorized hash path lives in
:mod:`dsv_platform.core.splits.hash_split`, the shared ranges and constants in
:mod:`dsv_platform.core.splits.split_common`; both are re-exported here.

Details: docs/hashing.md
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.hash_split import (
    BATCH_ROWS,
    HashSplitPolicy,
    as_identifier_array,
    identifier_bytes,
)
from dsv_platform.core.splits.split_common import (
    ALGORITHM,
    GROUP_SPLIT,
    HASH_SPLIT,
    IDENTIFIER_ENCODING,
    MAX_MODULUS,
    SEEDED_RANDOM,
    TIME_SPLIT,
    SplitAssignment,
    SplitName,
    SplitRange,
    document_fields,
    is_int,
    parse_bounds,
    parse_utc,
    utc_text,
)

if TYPE_CHECKING:  # imported where used: loading a split policy (`dsv resolve`) needs neither numpy nor pyarrow
    import numpy as np
    import pyarrow as pa

__all__ = [
    "ALGORITHM",
    "BATCH_ROWS",
    "GROUP_SPLIT",
    "HASH_SPLIT",
    "IDENTIFIER_ENCODING",
    "MAX_MODULUS",
    "SEEDED_RANDOM",
    "TIME_SPLIT",
    "GroupSplitPolicy",
    "HashSplitPolicy",
    "SeededRandomSplitPolicy",
    "SplitAssignment",
    "SplitName",
    "SplitPolicy",
    "SplitRange",
    "TimeSplitPolicy",
    "assign",
    "identifier_bytes",
    "parse_bounds",
    "parse_utc",
    "policy_from_document",
    "utc_text",
]


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1)


def _epoch_units_ceil(moment: datetime, unit: str) -> int:
    """The smallest count of ``unit`` since the epoch that is >= ``moment`` (so ``t < moment`` iff ``t < count``)."""
    micros = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // _MICROSECOND
    per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[unit]
    return -((-micros * per_second) // 10**6)


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
        d = document_fields(doc, TIME_SPLIT, {"column", "train_until", "validation_until"})
        return cls(d["column"], parse_utc(d["train_until"], "train_until"), parse_utc(d["validation_until"], "validation_until"))

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def split_indices(self, times: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """0 train, 1 validation, 2 test for a timezone-aware timestamp column without nulls."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        t = times.type
        if not pa.types.is_timestamp(t) or t.tz is None:
            raise SplitPolicyError(f"time split column {self.column!r} has type {t}; it must be a timezone-aware timestamp")
        if times.null_count:
            raise SplitPolicyError(f"time split column {self.column!r} holds {times.null_count} null timestamps")
        counts = np.asarray(pc.cast(times, pa.int64()).to_numpy(zero_copy_only=False))
        bounds = np.array([_epoch_units_ceil(self.train_until, t.unit), _epoch_units_ceil(self.validation_until, t.unit)])
        return np.searchsorted(bounds, counts, side="right").astype(np.int32)

    def assign_values(self, times: pa.Array | pa.ChunkedArray) -> SplitAssignment:
        import pyarrow as pa

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
        d = document_fields(doc, GROUP_SPLIT, {"group_column", "hash_split"})
        return cls(d["group_column"], HashSplitPolicy.from_document(d["hash_split"]))

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    def assign_values(self, groups: Any) -> SplitAssignment:
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = as_identifier_array(groups)
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
        if not is_int(self.seed) or self.seed < 0:
            raise SplitPolicyError(f"seed {self.seed!r} must be a non-negative integer")
        object.__setattr__(self, "parts", tuple(self.parts))
        if any(not is_int(p.upper) or p.upper <= 0 for p in self.parts):
            raise SplitPolicyError(f"split parts {[(p.name, p.upper) for p in self.parts]} must be positive integers")
        _ = self.hash_policy  # building the equivalent hash policy validates the names and the total

    @classmethod
    def from_parts(cls, seed: int, parts: Mapping[str, int], key_column: str | None = None) -> SeededRandomSplitPolicy:
        return cls(seed, tuple(SplitRange(k, v) for k, v in parts.items()), key_column)

    @property
    def hash_policy(self) -> HashSplitPolicy:
        """The equivalent ``hash-split/1`` policy: salt ``seeded-random/1:<seed>``, cumulative parts."""
        import numpy as np

        cumulative = np.cumsum([p.upper for p in self.parts]).tolist() if self.parts else []
        ranges = tuple(SplitRange(p.name, int(c)) for p, c in zip(self.parts, cumulative, strict=True))
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
        d = document_fields(doc, SEEDED_RANDOM, {"algorithm", "seed", "key_column", "parts"})
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
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

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
