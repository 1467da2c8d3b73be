"""``time-split/1``: train before one instant, validation before a second, test from then on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.split_common import (
    TIME_SPLIT,
    CheckTally,
    ColumnNeed,
    PolicyCheck,
    SplitAssignment,
    SplitName,
    config_fields,
    config_key,
    config_text,
    document_fields,
    parse_utc,
    recorded_input_column,
    utc_text,
)

if TYPE_CHECKING:  # imported where used: loading a split policy (`dsv resolve`) needs neither numpy nor pyarrow
    import numpy as np
    import pyarrow as pa

_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1)
_KEYS = {"column", "train_until", "validation_until"}


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

    policy_name: ClassVar[str] = TIME_SPLIT
    needs: ClassVar[ColumnNeed] = ColumnNeed.TIME
    column_key: ClassVar[str | None] = "column"
    assigns_buckets: ClassVar[bool] = False

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
        d = document_fields(doc, TIME_SPLIT, _KEYS)
        return cls(d["column"], parse_utc(d["train_until"], "train_until"), parse_utc(d["validation_until"], "validation_until"))

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> TimeSplitPolicy:
        """``{policy, column, train_until, validation_until}``: the document itself (instants as ISO 8601 with an offset)."""
        config_fields(raw, file=file, allowed=_KEYS, required=_KEYS)
        column = config_text(raw, "column", file=file)
        with config_key(file, "train_until"):
            train = parse_utc(config_text(raw, "train_until", file=file), "train_until")
        with config_key(file, "validation_until"):
            validation = parse_utc(config_text(raw, "validation_until", file=file), "validation_until")
            return cls(column, train, validation)

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    @property
    def grouped_by(self) -> str | None:
        return None

    def input_column(self, id_column: str | None) -> str | None:
        return recorded_input_column(self.column, id_column)

    def expected_parts(self) -> dict[str, int] | None:
        return None  # the data decide how many rows fall before each instant

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        """Every row's time lies in its split's range (needs :attr:`column` in ``assignment``)."""
        from dsv_platform.core.splits.split_checks import time_boundaries_respected

        return (PolicyCheck("time_boundaries_respected", time_boundaries_respected(assignment, self, split_column)),)

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        """Every row's time lies in its split's range, tallied batch by batch."""
        from dsv_platform.core.splits.split_checks import TimeBoundaryTally

        return (TimeBoundaryTally(self, split_column),)

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
