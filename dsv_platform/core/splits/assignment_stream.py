"""A dataset's split assignment computed batch by batch, over its examples read in the stored order.

The stored assignment is sorted by the example's key; a reader that hands the examples over in
that order, a batch at a time, gets each batch's assignment from :func:`assign_in_order`, and
:class:`SplitTally` keeps what the build's gates need (rows per split, the policy's own rules)
without holding the rows. The whole-table :func:`dsv_platform.core.splits.policy.assign_examples`
gives the same rows; the streamed hash is :func:`dsv_platform.core.splits.split_checks.hash_sorted_lines`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsv_platform.core.splits.policy import SplitPolicy, assign, dataset_column
from dsv_platform.core.splits.split_common import PolicyCheck

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class AssignmentColumns:
    """What an assignment reads and stores: the example id, a composite key's columns, the entity, the policy's column."""

    example_id: str
    key: tuple[str, ...]
    entity: str
    column: str | None  # None: the policy draws by row position

    @property
    def stored(self) -> list[str]:
        return list(dict.fromkeys([self.example_id, *self.key, self.entity]))

    @property
    def read(self) -> list[str]:
        return list(dict.fromkeys([*self.stored, self.column] if self.column is not None else self.stored))

    @property
    def order(self) -> list[str]:
        """The columns the stored assignment is sorted by (ascending): the composite key's, else the example id."""
        return list(self.key) if self.key else [self.example_id]


def assignment_columns(policy: SplitPolicy, example_id: str, entity_column: str, key: Sequence[str] = ()) -> AssignmentColumns:
    return AssignmentColumns(example_id, tuple(key), entity_column, dataset_column(policy, example_id))


def assign_in_order(batch: pa.Table, policy: SplitPolicy, columns: AssignmentColumns, positions: Any = None) -> tuple[pa.Table, pa.Table]:
    """``(checked, stored)`` of one batch already in the stored order (:func:`assign_examples`'s two tables, a batch of them).

    ``positions``: each row's position among the unsorted examples, for a policy drawing by row position.
    """
    checked = assign(batch.select(columns.read), policy, columns.column, positions=positions)
    return checked, checked.select([c for c in checked.column_names if c in columns.stored or c in ("split", "bucket")])


class SplitTally:
    """Rows per split and the policy's own rules, over an assignment fed batch by batch in the stored order."""

    def __init__(self, policy: SplitPolicy) -> None:
        self.policy, self.rows = policy, 0
        self._counts: dict[str, int] = {}
        self._tallies = policy.check_tallies()

    def add(self, checked: pa.Table) -> None:
        import pyarrow.compute as pc

        for pair in pc.value_counts(checked.column("split")).to_pylist():
            self._counts[pair["values"]] = self._counts.get(pair["values"], 0) + int(pair["counts"])
        for tally in self._tallies:
            tally.add(checked)
        self.rows += checked.num_rows

    @property
    def counts(self) -> Mapping[str, int]:
        """Every split present, by name."""
        return dict(self._counts)

    def checks(self) -> tuple[PolicyCheck, ...]:
        """What :meth:`SplitPolicy.checks` says of the whole assignment."""
        return tuple(PolicyCheck(t.name, t.report(), t.blocking) for t in self._tallies)


__all__ = ["AssignmentColumns", "SplitTally", "assign_in_order", "assignment_columns"]
