"""The split-policy protocol and the registry of policies by name.

Every split policy is a frozen value satisfying :class:`SplitPolicy`: its document and
configuration shapes, the column it reads (and of what kind), the column whose values
share a split, how it assigns, its expected shares and the rules a build checks on its
assignment. Nothing outside a policy's module asks what type a policy is: adding one is
its module plus an entry in :data:`REGISTRY`.

Details: docs/configuration.md (the ``split_policy`` shapes), docs/hashing.md
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.era_split import EraSplitPolicy
from dsv_platform.core.splits.group_split import GroupSplitPolicy
from dsv_platform.core.splits.hash_split import HashSplitPolicy
from dsv_platform.core.splits.seeded_random import SeededRandomSplitPolicy
from dsv_platform.core.splits.split_common import CheckTally, ColumnNeed, PolicyCheck, SplitAssignment
from dsv_platform.core.splits.time_split import TimeSplitPolicy

if TYPE_CHECKING:  # imported where used: loading a split policy (`dsv resolve`) needs neither numpy nor pyarrow
    import pyarrow as pa


class SplitPolicy(Protocol):
    """What every split policy is (see the module docstring)."""

    policy_name: ClassVar[str]
    needs: ClassVar[ColumnNeed]
    column_key: ClassVar[str | None]
    assigns_buckets: ClassVar[bool]

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def policy_hash(self) -> str: ...

    @property
    def column(self) -> str | None:
        """The column the policy records (None: it assigns the identifier column it is given, or row positions)."""

    @property
    def grouped_by(self) -> str | None:
        """A column whose rows of one value always share a split, or None."""

    def to_document(self) -> dict[str, Any]: ...

    @classmethod
    def from_document(cls, doc: Any) -> SplitPolicy: ...

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> SplitPolicy:
        """From a definition's ``split_policy`` (``identifier``: the example id column); errors are ConfigError naming the key."""

    def input_column(self, id_column: str | None) -> str | None:
        """The column :func:`assign` reads given the caller's ``id_column`` (None: row positions); raises when they disagree."""

    def assign_values(self, values: Any) -> SplitAssignment: ...

    def expected_parts(self) -> dict[str, int] | None:
        """Each split's integer share when the policy fixes one, else None (no proportions to compare)."""

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        """The policy's own rules checked on ``assignment`` (its column and the split column)."""

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        """:meth:`checks` as tallies fed an assignment batch by batch, in row order (a build's streamed assignment)."""


REGISTRY: dict[str, type[SplitPolicy]] = {
    cls.policy_name: cls for cls in (HashSplitPolicy, GroupSplitPolicy, TimeSplitPolicy, SeededRandomSplitPolicy, EraSplitPolicy)
}
"""Every policy by its document's ``policy`` name."""


def policy_from_document(doc: Any) -> SplitPolicy:
    """Read any split policy back from its document; unknown policies are SplitPolicyError."""
    name = doc.get("policy") if isinstance(doc, Mapping) else None
    if name not in REGISTRY:
        raise SplitPolicyError(f"unknown split policy {name!r}; known: {sorted(REGISTRY)}")
    return REGISTRY[name].from_document(doc)


def policy_from_config(raw: Any, *, identifier: str, file: str | Path) -> SplitPolicy:
    """A definition's ``split_policy`` (any registered policy's short form or document); ConfigError names file and key."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"must be a mapping, got {type(raw).__name__}", file=file, key="split_policy")
    name = raw.get("policy")
    if name is None:
        raise ConfigError(f"is required (one of {sorted(REGISTRY)})", file=file, key="split_policy.policy")
    if name not in REGISTRY:
        raise ConfigError(f"unknown split policy {name!r}; known: {sorted(REGISTRY)}", file=file, key="split_policy.policy")
    return REGISTRY[name].from_config(raw, identifier=identifier, file=file)


def dataset_column(policy: SplitPolicy, example_id: str) -> str | None:
    """The column a dataset's examples are assigned by: the example id for a policy that records no column
    (``hash-split/1``), else the policy's own (None: row positions, a legacy ``seeded-random/1`` document)."""
    return policy.input_column(example_id if policy.column_key is None else None)


def assign(table: pa.Table, policy: SplitPolicy, id_column: str | None = None, *, split_column: str = "split", positions: Any = None) -> pa.Table:
    """``table`` plus a string ``split_column`` (and an int64 ``bucket`` column for hash-based policies).

    ``id_column`` names the identifier column of a policy that records none (``hash-split/1``);
    the other policies record their column, and ``id_column``, if given, must match it. A policy
    drawing by row position reads ``positions`` (default 0, 1, ...: the rows of a batch read in order).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = policy.input_column(id_column)
    added = [split_column] + (["bucket"] if policy.assigns_buckets else [])
    clashes = [n for n in added if n in table.column_names]
    if clashes:
        raise SplitPolicyError(f"table already has a column {clashes[0]!r}; pass another split_column or drop it")
    if column is None:
        values: Any = pa.array(np.arange(table.num_rows, dtype=np.int64)) if positions is None else positions
    elif column not in table.column_names:
        raise SplitPolicyError(f"split column {column!r} is not in the table (columns: {table.column_names})")
    else:
        values = table.column(column)
    result = policy.assign_values(values)
    out = table.append_column(split_column, pc.cast(result.splits, pa.string()))
    return out if result.buckets is None else out.append_column("bucket", result.buckets)


def assign_examples(examples: pa.Table, policy: SplitPolicy, example_id: str, entity_column: str, key: Sequence[str] = ()) -> tuple[pa.Table, pa.Table]:
    """A dataset's split assignment, sorted by example id (by ``key``, when given): ``(checked, stored)``.

    ``checked`` also holds the policy's column (what :meth:`SplitPolicy.checks` reads);
    ``stored``, the assignment object, holds the example id, the ``key`` columns (a composite
    key's, so readers can join it to the rows), the entity column, the split and the bucket.
    """
    column = dataset_column(policy, example_id)
    stored = list(dict.fromkeys([example_id, *key, entity_column]))
    read = [*stored, column] if column is not None else stored
    order = [(k, "ascending") for k in key] if key else example_id
    checked = assign(examples.select(list(dict.fromkeys(read))), policy, column).sort_by(order)
    return checked, checked.select([c for c in checked.column_names if c in stored or c in ("split", "bucket")])


__all__ = [
    "REGISTRY",
    "CheckTally",
    "ColumnNeed",
    "PolicyCheck",
    "SplitPolicy",
    "assign",
    "assign_examples",
    "dataset_column",
    "policy_from_config",
    "policy_from_document",
]
