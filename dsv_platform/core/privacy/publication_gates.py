"""The privacy-policy publication gates: no subject under deletion, no restricted column without an access block (pure).

Always on (a privacy gate fails closed; nothing to declare). ``privacy:subjects_under_deletion`` blocks a realization
holding rows of a subject with a privacy deletion request (pending, or applied at a newer redaction generation than
the one the build read), naming how many, never who. ``privacy:restricted_columns`` blocks an output column a source
contract (or the output contract) marks ``restricted: true`` that the definition's ``access.restricted_columns`` does
not name. Details: docs/gc-and-privacy.md ("Publication gates")
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dsv_platform.core import canonical_json
from dsv_platform.core.contracts.contract import Contract
from dsv_platform.core.publication.gates import GateResult

SUBJECTS = "privacy:subjects_under_deletion"
RESTRICTED = "privacy:restricted_columns"
SHOWN = 10  # columns named in a gate's detail; the count says how many more


@dataclass(frozen=True)
class Request:
    """A privacy deletion request as the gate needs it: the subject's keyed hash, its generation, whether it completed."""

    subject_key_hash: str
    generation: int
    completed: bool


def subjects_gate(present: Collection[str], requests: Iterable[Request], *, read_generation: int, registry_generation: int) -> GateResult:
    """Blocks when a subject hash in ``present`` (the output's subjects) has a deletion request; the detail counts, never names."""
    hit: dict[str, Request] = {}
    for r in requests:  # a subject's newest request says whether it is pending
        if r.subject_key_hash in present and (r.subject_key_hash not in hit or r.generation > hit[r.subject_key_hash].generation):
            hit[r.subject_key_hash] = r
    pending = sum(1 for r in hit.values() if not r.completed)
    newer = sum(1 for r in hit.values() if r.completed and r.generation > read_generation)
    detail: dict[str, str | int | bool | None] = {
        "rule": "no_subject_under_deletion",
        "observed": f"{len(hit)} subject(s) under deletion in the output ({pending} pending, {newer} applied after generation {read_generation})",
        "subjects": len(hit),
        "pending": pending,
        "applied_after_read": newer,
        "read_generation": read_generation,
        "registry_generation": registry_generation,
        "bound": "no row of a subject with a privacy deletion request",
    }
    if hit:
        detail["fix"] = "finish the deletion (`dsv privacy reconcile`), then `dsv build` again: the rebuild excludes the subjects"
    return GateResult(SUBJECTS, not hit, detail)


def unhashable_gate(reason: str, *, read_generation: int, registry_generation: int) -> GateResult:
    """The failed gate when the output's subjects cannot be checked against the deletion requests (fail closed)."""
    detail: dict[str, str | int | bool | None] = {
        "rule": "no_subject_under_deletion",
        "observed": f"cannot check: {reason}",
        "read_generation": read_generation,
        "registry_generation": registry_generation,
        "bound": "no row of a subject with a privacy deletion request",
        "fix": "build with the platform's encrypting object store and subject-hash key (DSV_SUBJECT_KEY_FILE)",
    }
    return GateResult(SUBJECTS, False, detail)


def restricted_columns(output: Contract, sources: Mapping[str, Contract]) -> dict[str, tuple[str, ...]]:
    """Output column -> the contracts (sources by name, ``contract`` for the output's own) marking it ``restricted``, for those marked."""
    marked: dict[str, list[str]] = {}
    for name, contract in [*sorted(sources.items()), ("contract", output)]:
        for column in contract.columns:
            if column.restricted and column.name in output.column_names:
                marked.setdefault(column.name, []).append(name)
    return {c: tuple(by) for c, by in sorted(marked.items())}


def restricted_gate(marked: Mapping[str, Collection[str]], covered: Collection[str], *, file: str) -> GateResult:
    """Blocks when a restricted output column is not in the definition's ``access.restricted_columns``, naming it and the fix."""
    open_columns = [c for c in sorted(marked) if c not in covered]
    shown = ", ".join(f"{c} (restricted by {', '.join(sorted(marked[c]))})" for c in open_columns[:SHOWN])
    more = f" and {len(open_columns) - SHOWN} more" if len(open_columns) > SHOWN else ""
    detail: dict[str, str | int | bool | None] = {
        "rule": "restricted_columns_have_access",
        "column": open_columns[0] if open_columns else None,
        "observed": f"not covered: {shown}{more}" if open_columns else f"{len(marked)} restricted column(s), each covered",
        "restricted": len(marked),
        "uncovered": len(open_columns),
        "bound": "every restricted output column named in the definition's access.restricted_columns",
    }
    if open_columns:
        names = ", ".join(open_columns)
        detail["fix"] = f"add `access: {{restricted_columns: [{names}]}}` to {file} (or drop the column from the contract), then `dsv build` again"
    return GateResult(RESTRICTED, not open_columns, detail)


def coverage_key(marked: Mapping[str, Collection[str]], covered: Collection[str]) -> str | None:
    """What the logical key adds for restricted output columns (None when there are none: existing keys are unchanged).

    The access block is not part of the recipe; covering a restricted column in it is a new logical version, so a
    build blocked for an uncovered column publishes once the block covers it (the FAILED candidate keeps its request id).
    """
    if not marked:
        return None
    return canonical_json.sha256_hex({"restricted": sorted(marked), "covered": sorted(c for c in marked if c in covered)})[:12]


__all__ = ["RESTRICTED", "SUBJECTS", "Request", "coverage_key", "restricted_columns", "restricted_gate", "subjects_gate", "unhashable_gate"]
