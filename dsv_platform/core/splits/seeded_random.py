"""``seeded-random/1``: a counter-based draw, the same on every numpy/Python version."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dsv_platform.core import canonical_json
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.hash_split import HashSplitPolicy
from dsv_platform.core.splits.split_common import (
    ALGORITHM,
    SEEDED_RANDOM,
    CheckTally,
    ColumnNeed,
    PolicyCheck,
    SplitAssignment,
    SplitRange,
    config_fields,
    config_key,
    config_text,
    document_fields,
    is_int,
    recorded_input_column,
)

if TYPE_CHECKING:
    import pyarrow as pa


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

    policy_name: ClassVar[str] = SEEDED_RANDOM
    needs: ClassVar[ColumnNeed] = ColumnNeed.IDENTIFIER
    column_key: ClassVar[str | None] = "key_column"
    assigns_buckets: ClassVar[bool] = True

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

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> SeededRandomSplitPolicy:
        """``{policy, seed, parts: {name: share, ...}, key_column?}`` (key_column defaults to ``identifier``), or the full document.

        A document whose ``key_column`` is null draws by row position, as such definitions always have.
        """
        if "algorithm" in raw:
            with config_key(file, ""):
                return cls.from_document(raw)
        fields = config_fields(raw, file=file, allowed={"seed", "parts", "key_column"}, required={"seed", "parts"})
        key_column = config_text(fields, "key_column", file=file) if fields.get("key_column") is not None else identifier
        parts = fields["parts"]
        if not isinstance(parts, Mapping) or not parts:
            message = f"must map split names to positive integer shares (e.g. {{train: 8, test: 2}}), got {parts!r}"
            raise ConfigError(message, file=file, key="split_policy.parts")
        with config_key(file, "seed"):
            if not is_int(fields["seed"]) or fields["seed"] < 0:
                raise SplitPolicyError(f"seed {fields['seed']!r} must be a non-negative integer")
        with config_key(file, "parts"):
            return cls.from_parts(fields["seed"], {str(k): v for k, v in parts.items()}, key_column)

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    @property
    def column(self) -> str | None:
        return self.key_column

    @property
    def grouped_by(self) -> str | None:
        return self.key_column  # rows of one key draw the same number

    def input_column(self, id_column: str | None) -> str | None:
        return recorded_input_column(self.key_column, id_column)

    def expected_parts(self) -> dict[str, int] | None:
        return {p.name: p.upper for p in self.parts}

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        return ()

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        return ()

    def assign_values(self, keys: Any) -> SplitAssignment:
        return self.hash_policy.assign_values(keys)
