"""Dataset-level gates and the quality report stored with a manifest.

A gate is a named predicate over a sealed candidate (contract checks, counts,
uniqueness, label coverage, split invariants, drift). Data problems are gate
results with ``passed=False``; code errors are exceptions and fail the build.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import PublicationError


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    detail: Mapping[str, str | int | bool | None] = field(default_factory=dict)
    blocking: bool = True

    def to_document(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "blocking": self.blocking, "detail": dict(self.detail)}


@dataclass(frozen=True)
class QualityReport:
    """The gates a candidate went through; stored as an object beside the manifest."""

    manifest_hash: str
    gates: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates if g.blocking)

    @property
    def failed(self) -> list[GateResult]:
        return [g for g in self.gates if not g.passed]

    def to_document(self) -> dict[str, Any]:
        return {
            "format": "dsv-quality-report/1",
            "manifest_hash": self.manifest_hash,
            "passed": self.passed,
            "gates": [g.to_document() for g in sorted(self.gates, key=lambda g: g.name)],
        }

    def canonical_bytes(self) -> bytes:
        return canonical_json.dumps(self.to_document())


def rows_at_least(rows: int, minimum: int) -> GateResult:
    """A candidate with fewer rows than expected is not published."""
    return GateResult("rows_at_least", rows >= minimum, {"rows": rows, "minimum": minimum})


def report_of(manifest_hash: str, gates: Iterable[GateResult]) -> QualityReport:
    gates = tuple(gates)
    names = [g.name for g in gates]
    if len(set(names)) != len(names):
        raise ValueError(f"gate names must be unique, got {names}")
    return QualityReport(manifest_hash=manifest_hash, gates=gates)


class GatesFailedError(PublicationError):
    """A candidate's blocking gate(s) failed: the realization is FAILED; ``report`` holds every gate, ``report_object`` its stored copy."""

    def __init__(self, message: str, *, report: QualityReport, report_object: str) -> None:
        super().__init__(message)
        self.report = report
        self.report_object = report_object
