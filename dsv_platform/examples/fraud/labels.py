"""The fraud label versions, registered for ``config/labels/fraud.yaml`` (v5: 60 days, v6: 90 days)."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from dsv_platform.core.labels import LabelFunction
from dsv_platform.domain.labels import LABEL_DEFINITIONS, LabelDefinition, compute_labels


def _compute(definition: LabelDefinition) -> LabelFunction:
    def compute(tables: Mapping[str, pa.Table]) -> pa.Table:
        return compute_labels(tables["transactions"], tables["chargebacks"], definition)

    return LabelFunction(definition.name, definition.version, definition.description, ("transactions", "chargebacks"), compute)


LABELS: list[LabelFunction] = [_compute(d) for _, d in sorted(LABEL_DEFINITIONS.items())]
