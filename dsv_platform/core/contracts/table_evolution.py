"""Which contract changes a canonical table can take in place, from the ``dsv schema diff`` of its recorded and new contract.

Pure: a table keeps every row it ever landed (append-only), so a change is applied only when
the rows already landed stay true under the new contract (a nullable column added, a
widening, a declared rename, required -> nullable, a rule or description changed); any other
change is refused with one line naming it and what to do. Rules: docs/schema-evolution.md.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.contracts.schema_diff import Change, ChangeKind, SchemaDiff, diff_contracts
from dsv_platform.core.errors import DsvError, FailureKind

NEW_SOURCE = "or land the new shape as a new source (another name)"


class SchemaEvolutionError(DsvError):
    """A source contract changed in a way its canonical table cannot take: the landed rows would no longer satisfy it."""

    kind = FailureKind.BREAKING


class Step(enum.Enum):
    """What a change does to the table's Iceberg schema."""

    ADD_COLUMN = "add_column"  # a nullable column: rows already landed read null
    PROMOTE = "promote"  # a widening (the Iceberg type may stay the same: int16 -> int32 are both 'int')
    RENAME = "rename"  # by field id: every snapshot keeps its data, read under the new name
    MAKE_OPTIONAL = "make_optional"  # required -> nullable
    NONE = "none"  # a rule or description: the contract record changes, the Iceberg schema does not


@dataclass(frozen=True)
class Evolution:
    """The changes from a table's recorded contract to a new one, each with its step (or the reason it is refused)."""

    table: str
    diff: SchemaDiff
    steps: tuple[tuple[Change, Step], ...]
    refused: tuple[tuple[Change, str], ...]

    @property
    def changes(self) -> tuple[Change, ...]:
        return self.diff.changes

    @property
    def alters_schema(self) -> bool:
        return any(step is not Step.NONE for _, step in self.steps)

    def refusal(self, *, source: str, file: str | None) -> SchemaEvolutionError:
        """The one-line error naming every refused change and what to do about the first."""
        advice = self.refused[0][1]
        named = "; ".join(f"column {c.describe()}" if c.column is not None else c.describe() for c, _ in self.refused)
        where = f"{file}: " if file else ""
        return SchemaEvolutionError(
            f"{where}source {source}: the contract change is breaking for the canonical table {self.table} "
            f"(dsv schema diff: {named}): {advice}; the table is unchanged"
        )


def _advice(change: Change) -> str | None:
    """None when the table can take ``change``; otherwise what the source owner can do instead."""
    kind, col = change.kind, change.column
    if kind is ChangeKind.ADDITIVE:
        return None if not change.breaking else f"the rows already landed have no value for {col!r}: declare it 'nullable: true'"
    if kind is ChangeKind.NULLABILITY:
        if change.new == "nullable":
            return None  # (a key column cannot be nullable: the contract refuses it)
        return f"the rows already landed may hold nulls in {col!r}: keep it 'nullable: true', {NEW_SOURCE}"
    if kind in (ChangeKind.WIDENING, ChangeKind.RENAME, ChangeKind.SEMANTIC):
        return None
    if kind is ChangeKind.REMOVAL:
        return f"the table keeps every column it ever had: declare {col!r} again ('nullable: true' if new batches omit it), {NEW_SOURCE}"
    if kind is ChangeKind.NARROWING:
        return f"values already landed in {col!r} ({change.old}) may not fit {change.new}: keep {change.old}, {NEW_SOURCE}"
    if kind is ChangeKind.TYPE_CHANGE:
        return f"the rows already landed hold {change.old} in {col!r}: keep the type and add a column of another name for {change.new}, {NEW_SOURCE}"
    if kind is ChangeKind.UNIT_CHANGE:
        return f"the rows already landed in {col!r} are in {change.old}: keep the unit and add a column of another name in {change.new}"
    return f"the table is deduplicated by its key {change.old}: keep it, {NEW_SOURCE}"  # KEY_CHANGE


_STEPS = {
    ChangeKind.ADDITIVE: Step.ADD_COLUMN,
    ChangeKind.WIDENING: Step.PROMOTE,
    ChangeKind.RENAME: Step.RENAME,
    ChangeKind.NULLABILITY: Step.MAKE_OPTIONAL,
    ChangeKind.SEMANTIC: Step.NONE,
}


def plan_evolution(recorded: Contract, new: Contract, *, table: str) -> Evolution:
    """Classify every change from the table's ``recorded`` contract to ``new`` (a ``renamed_from`` mistake is a ContractError)."""
    diff = diff_contracts(recorded, new)
    steps: list[tuple[Change, Step]] = []
    refused: list[tuple[Change, str]] = []
    for change in diff.changes:
        advice = _advice(change)
        if advice is None:
            steps.append((change, _STEPS[change.kind]))
        else:
            refused.append((change, advice))
    return Evolution(table, diff, tuple(steps), tuple(refused))


__all__ = ["Evolution", "SchemaEvolutionError", "Step", "plan_evolution"]
