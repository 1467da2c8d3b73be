"""A small artifact producer over fraud_training_set:v6, importable from a snapshot of the tree (reproduction scenarios).

Its results depend on the rows, the parameters, the seed and the pinned local time zone (libc's and the
tzdata package's), so a reproduction that got any of them wrong would not match.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.config.timezones import zone

DATASET = "fraud_training_set:v6"


class AmountReport:
    name = "fraud_amount_report"
    precision: Mapping[str, Any] = {"default": "exact", "fraud_rate": {"abs": "0.000001"}}
    zones = ("Europe/Berlin",)
    runner_timezone = "Europe/Berlin"

    def compute(self, inputs: Mapping[str, pa.Table], parameters: Mapping[str, Any], seed: int) -> dict[str, Any]:
        table = inputs[DATASET]
        amounts = [Decimal(str(a)) for a in table.column("amount").to_pylist() if a is not None]
        threshold = Decimal(str(parameters["threshold"]))
        fraud = pc.sum(pc.cast(table.column("is_fraud"), pa.int64())).as_py() or 0
        moment = dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)  # the hour Berlin's clocks go forward
        return {
            "rows": table.num_rows,
            "amount_total": str(sum(amounts, Decimal(0))),
            "above_threshold": sum(1 for a in amounts if a > threshold),
            "fraud_rate": str(round(Decimal(fraud) / Decimal(max(table.num_rows, 1)), 8)),
            "sample_row": random.Random(seed).randrange(max(table.num_rows, 1)),
            "berlin_local": moment.astimezone(zone("Europe/Berlin")).isoformat(),
            "libc_local_hour": dt.datetime.fromtimestamp(moment.timestamp()).hour,
        }

    def render(self, inputs: Mapping[str, pa.Table], results: Mapping[str, Any], footer: str) -> dict[str, bytes]:
        lines = [f"{k}: {v}" for k, v in sorted(results.items())]
        return {"report.txt": "\n".join([*lines, footer, ""]).encode()}


PRODUCER = AmountReport()
