"""Fraud label definitions, their computation (pure: tables in, table out) and their registration.

``LABELS`` registers the versions for ``config/labels/fraud.yaml``.

A label definition is versioned: v5 = a confirmed chargeback within 60 days of
the transaction, v6 = within 90 days. Each version is its own label table keyed
by the example id (``transaction_id``); changing the definition is a new
version applied to history, never a rewrite of the old one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv_platform.core.config.labels import LabelFunction
from dsv_platform.examples.fraud.specs import FRAUD_LABELS

if TYPE_CHECKING:  # imported where used: loading the configuration (`dsv resolve`) needs no pyarrow
    import pyarrow as pa


@dataclass(frozen=True)
class LabelDefinition:
    name: str
    version: int
    window_days: int
    description: str

    @property
    def table_name(self) -> str:
        """The label table of this version, e.g. ``labels_fraud_v6``."""
        return f"labels_{self.name}_v{self.version}"

    @property
    def ref(self) -> str:
        return f"{self.name}:v{self.version}"


LABEL_DEFINITIONS: dict[int, LabelDefinition] = {
    5: LabelDefinition("fraud", 5, 60, "confirmed chargeback within 60 days of the transaction"),
    6: LabelDefinition("fraud", 6, 90, "confirmed chargeback within 90 days of the transaction"),
}


def label_definition(version: int) -> LabelDefinition:
    try:
        return LABEL_DEFINITIONS[version]
    except KeyError:
        raise KeyError(f"no fraud label definition v{version}; known: {sorted(LABEL_DEFINITIONS)}") from None


def compute_labels(transactions: pa.Table, chargebacks: pa.Table, definition: LabelDefinition) -> pa.Table:
    """One label row per transaction (columns ``transaction_id``, ``event_date`` used), by ``definition``.

    ``chargebacks`` is what is known (as of some time): a transaction is fraud
    if it has a ``confirmed`` chargeback whose ``charged_back_at`` day is at most
    ``window_days`` after the transaction day. Rows come out sorted by id.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    tx = transactions.select(["transaction_id", "event_date"])
    cb = chargebacks.select(["transaction_id", "chargeback_id", "status", "charged_back_at"])
    cb = cb.append_column("charged_back_date", pc.cast(pc.cast(cb.column("charged_back_at"), pa.timestamp("us")), pa.date32())).drop_columns(
        ["charged_back_at"]
    )
    joined = tx.join(cb, keys="transaction_id", join_type="left outer").sort_by("transaction_id")
    days = pc.days_between(joined.column("event_date"), joined.column("charged_back_date"))
    confirmed = pc.fill_null(pc.equal(joined.column("status"), "confirmed"), False)
    in_window = pc.fill_null(pc.and_(pc.greater_equal(days, 0), pc.less_equal(days, definition.window_days)), False)
    schema = FRAUD_LABELS.arrow_schema
    return pa.table(
        {
            "transaction_id": joined.column("transaction_id"),
            "event_date": joined.column("event_date"),
            "label_version": pa.array([definition.version] * joined.num_rows, pa.int32()),
            "is_fraud": pc.and_(confirmed, in_window),
            "chargeback_id": joined.column("chargeback_id"),
            "days_to_chargeback": pc.cast(days, pa.int32()),
        },
        schema=schema,
    )


def _registered(definition: LabelDefinition) -> LabelFunction:
    def compute(tables: Mapping[str, pa.Table]) -> pa.Table:
        return compute_labels(tables["transactions"], tables["chargebacks"], definition)

    return LabelFunction(definition.name, definition.version, definition.description, ("transactions", "chargebacks"), compute)


LABELS: list[LabelFunction] = [_registered(d) for _, d in sorted(LABEL_DEFINITIONS.items())]
