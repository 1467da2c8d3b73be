"""Small renderers from our values to Dagster metadata (markdown tables read best in the UI)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import dagster as dg

from dsv_platform.core.contracts.validation import FailureCase

MAX_ROWS = 50

if TYPE_CHECKING:
    AssetResult = dg.MaterializeResult[None]
else:
    AssetResult = dg.MaterializeResult  # Dagster reads asset return annotations: a subscripted one breaks assets with checks


def md_table(header: Sequence[str], rows: Iterable[Sequence[object]], *, limit: int = MAX_ROWS) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = list(rows)
    for row in rows[:limit]:
        lines.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", "\\n") for v in row) + " |")
    if len(rows) > limit:
        lines.append(f"\n{len(rows) - limit} more not shown")
    return dg.MetadataValue.md("\n".join(lines))


def failure_cases(failures: Sequence[FailureCase]) -> dg.MetadataValue:
    return md_table(["row", "key", "column", "check", "value"], [(f.row_index, f.row_key, f.column, f.check, f.value) for f in failures])
