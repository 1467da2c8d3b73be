"""``era-split/1``: examples split by the serving policy (the era) that produced them.

A deployed model changes what the platform later sees: a fraud rule blocks some transactions, a
recommender shows some items. Evaluating on examples from the era a model was trained in flatters it;
the policy-era split assigns whole eras to splits instead. The policy records the column naming each
example's era and, per split, the eras it takes (each era in exactly one split). An example whose era is
listed nowhere, or null, is an error naming the column and the values: never dropped, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dsv_platform.core import canonical_json
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.split_common import (
    CheckTally,
    ColumnNeed,
    PolicyCheck,
    SplitAssignment,
    config_fields,
    config_text,
    document_fields,
    recorded_input_column,
)

if TYPE_CHECKING:  # imported where used: loading a split policy (`dsv resolve`) needs neither numpy nor pyarrow
    import pyarrow as pa

    from dsv_platform.core.splits.split_checks import CheckReport

ERA_SPLIT = "era-split/1"
_KEYS = {"column", "eras"}
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True)
class EraSplitPolicy:
    """``era-split/1``: each split takes the examples whose ``column`` names one of its eras."""

    column: str
    eras: tuple[tuple[str, tuple[str, ...]], ...]  # (split, its eras), in the configured order

    policy_name: ClassVar[str] = ERA_SPLIT
    needs: ClassVar[ColumnNeed] = ColumnNeed.IDENTIFIER
    column_key: ClassVar[str | None] = "column"
    assigns_buckets: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not self.eras:
            raise SplitPolicyError("eras: no split named")
        seen: dict[str, str] = {}
        for split, eras in self.eras:
            if not split or not split[0].isalpha() or set(split) - _NAME_CHARS:
                raise SplitPolicyError(f"eras: {split!r} is not a split name (a letter, then letters, digits, _ or -)")
            if not eras:
                raise SplitPolicyError(f"eras.{split}: takes no era")
            for era in eras:
                if era in seen:
                    raise SplitPolicyError(f"eras: era {era!r} is in both {seen[era]!r} and {split!r}")
                seen[era] = split

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(split for split, _ in self.eras)

    def to_document(self) -> dict[str, Any]:
        return {"policy": ERA_SPLIT, "column": self.column, "eras": {split: list(eras) for split, eras in self.eras}}

    @classmethod
    def from_document(cls, doc: Any) -> EraSplitPolicy:
        d = document_fields(doc, ERA_SPLIT, _KEYS)
        return cls(str(d["column"]), _eras(d["eras"]))

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> EraSplitPolicy:
        """``{policy, column, eras: {SPLIT: [ERA, ...], ...}}`` (eras as text; numbers are read as their text)."""
        config_fields(raw, file=file, allowed=_KEYS, required=_KEYS)
        column = config_text(raw, "column", file=file)
        try:
            return cls(column, _eras(raw["eras"]))
        except SplitPolicyError as exc:
            raise ConfigError(str(exc), file=file, key="split_policy.eras") from None

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    @property
    def grouped_by(self) -> str | None:
        return self.column  # one era, one split: no era value may cross splits

    def input_column(self, id_column: str | None) -> str | None:
        return recorded_input_column(self.column, id_column)

    def expected_parts(self) -> dict[str, int] | None:
        return None  # the data decide how many examples each era holds

    def split_indices(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Each example's split as its index in :attr:`names`; SplitPolicyError names nulls and unlisted eras."""
        import pyarrow as pa
        import pyarrow.compute as pc

        text = pc.cast(values, pa.string())
        if text.null_count:
            raise SplitPolicyError(f"era column {self.column!r} holds {text.null_count} nulls; every example needs its era")
        eras = [era for _, listed in self.eras for era in listed]
        position = pc.index_in(text, value_set=pa.array(eras, pa.string()))
        if position.null_count:
            unknown = sorted(pc.unique(pc.filter(text, pc.is_null(position))).to_pylist())
            raise SplitPolicyError(f"era column {self.column!r}: {unknown[:5]} in no split (the policy's eras: {sorted(eras)})")
        split_of_era = pa.array([i for i, (_, listed) in enumerate(self.eras) for _ in listed], pa.int32())
        taken = pc.take(split_of_era, position)
        return pa.concat_arrays(taken.chunks) if isinstance(taken, pa.ChunkedArray) else taken

    def assign_values(self, values: pa.Array | pa.ChunkedArray) -> SplitAssignment:
        import pyarrow as pa

        return SplitAssignment(pa.DictionaryArray.from_arrays(self.split_indices(values), pa.array(self.names, pa.string())), None)

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        tally = EraTally(self, split_column)
        tally.add(assignment)
        return (PolicyCheck(tally.name, tally.report()),)

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        return (EraTally(self, split_column),)


def _eras(raw: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not isinstance(raw, Mapping):
        raise SplitPolicyError(f"eras must map each split to its list of eras, got {type(raw).__name__}")
    out = []
    for split, eras in raw.items():
        if not isinstance(eras, (list, tuple)) or any(isinstance(e, bool) or not isinstance(e, (str, int)) or e == "" for e in eras):
            raise SplitPolicyError(f"eras.{split}: must be a list of era names, got {eras!r}")
        out.append((str(split), tuple(str(e) for e in eras)))
    return tuple(out)


class EraTally:
    """``eras_respected``: every example's split is the one its era is listed under, tallied batch by batch."""

    name = "eras_respected"
    blocking = True

    def __init__(self, policy: EraSplitPolicy, split_column: str = "split") -> None:
        self.policy, self.split_column = policy, split_column
        self.rows: dict[str, int] = {}
        self.violations: dict[str, int] = {}
        self.first: dict[str, str] = {}

    def add(self, table: pa.Table) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        names = pa.array(self.policy.names, pa.string())
        eras = table.column(self.policy.column)
        expected = pc.take(names, self.policy.split_indices(eras))  # an unlisted era raises, naming it
        actual = pc.cast(table.column(self.split_column), pa.string())
        wrong = pc.not_equal(actual, expected)
        for pair in pc.value_counts(actual).to_pylist():
            self.rows[pair["values"]] = self.rows.get(pair["values"], 0) + int(pair["counts"])
        bad = pc.filter(pa.table({"split": actual, "era": pc.cast(eras, pa.string())}), wrong)
        for row in bad.group_by("split").aggregate([("era", "count"), ("era", "min")]).to_pylist():
            self.violations[row["split"]] = self.violations.get(row["split"], 0) + int(row["era_count"])
            self.first.setdefault(row["split"], str(row["era_min"]))

    def report(self) -> CheckReport:
        from dsv_platform.core.splits.split_checks import CheckFinding, CheckReport

        findings = []
        listed = dict(self.policy.eras)
        for name in list(self.policy.names) + sorted(set(self.rows) - set(self.policy.names)):
            bad = self.violations.get(name, 0)
            detail: dict[str, int | str] = {"rows": self.rows.get(name, 0), "violations": bad, "eras": ",".join(listed.get(name, ()))}
            if bad:
                detail["first_violation_era"] = self.first[name]
            findings.append(CheckFinding(f"eras_respected[{name}]", bad == 0, detail))
        return CheckReport(tuple(findings))


__all__ = ["ERA_SPLIT", "EraSplitPolicy", "EraTally"]
