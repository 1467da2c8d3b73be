"""``group-split/1``: ``hash-split/1`` on a group key column, so whole groups share a split."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dsv_platform.core import canonical_json
from dsv_platform.core.splits.hash_split import HashSplitPolicy, as_identifier_array, cumulative_parts, hash_from_config
from dsv_platform.core.splits.split_common import (
    GROUP_SPLIT,
    CheckTally,
    ColumnNeed,
    PolicyCheck,
    SplitAssignment,
    config_fields,
    config_key,
    config_text,
    document_fields,
    recorded_input_column,
)

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class GroupSplitPolicy:
    """``group-split/1``: ``hash-split/1`` on a group key column, so whole groups share a split."""

    group_column: str
    hash_policy: HashSplitPolicy

    policy_name: ClassVar[str] = GROUP_SPLIT
    needs: ClassVar[ColumnNeed] = ColumnNeed.IDENTIFIER
    column_key: ClassVar[str | None] = "group_column"
    assigns_buckets: ClassVar[bool] = True

    @property
    def names(self) -> tuple[str, ...]:
        return self.hash_policy.names

    def to_document(self) -> dict[str, Any]:
        return {"policy": GROUP_SPLIT, "group_column": self.group_column, "hash_split": self.hash_policy.to_document()}

    @classmethod
    def from_document(cls, doc: Any) -> GroupSplitPolicy:
        d = document_fields(doc, GROUP_SPLIT, {"group_column", "hash_split"})
        return cls(d["group_column"], HashSplitPolicy.from_document(d["hash_split"]))

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> GroupSplitPolicy:
        """``{policy, group_column, salt, bounds, modulus?}``, or the full document (it has ``hash_split``)."""
        if "bounds" not in raw:
            with config_key(file, ""):
                return cls.from_document(raw)
        fields = config_fields(raw, file=file, allowed={"group_column", "salt", "bounds", "modulus"}, required={"group_column", "salt", "bounds"})
        return cls(config_text(fields, "group_column", file=file), hash_from_config(fields, file))

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    @property
    def column(self) -> str | None:
        return self.group_column

    @property
    def grouped_by(self) -> str | None:
        return self.group_column

    def input_column(self, id_column: str | None) -> str | None:
        return recorded_input_column(self.group_column, id_column)

    def expected_parts(self) -> dict[str, int] | None:
        return cumulative_parts(self.hash_policy.ranges)

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        return ()  # every build checks entity disjointness on grouped_by

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        return ()

    def assign_values(self, groups: Any) -> SplitAssignment:
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = as_identifier_array(groups)
        if not pa.types.is_dictionary(arr.type) and arr.null_count == 0:
            arr = pc.dictionary_encode(arr)  # one hash per distinct group
        return self.hash_policy.assign_values(arr)
