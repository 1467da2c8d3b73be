"""The demo's label diff: chargebacks of the next months arrive, then ``dsv diff`` of v5 against v6.

Label v5 (60 days) and v6 (90 days) only disagree once chargebacks filed more than 60 days
after a transaction are known; this step lands them and prints the label flips by example id.

Details: docs/diff.md
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.ingest.batch import RawBatch, arrival_time, batch_of
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import CHARGEBACKS
from dsv_platform.services.publication.diff import diff_realizations

if TYPE_CHECKING:
    from dsv_platform.examples.fraud.demo import Demo

V5, V6 = "datasets/fraud_training_set/v5", "datasets/fraud_training_set/v6"  # asset keys (user strings)


def later_chargeback_rows(domain: FraudDomain, days: Sequence[dt.date]) -> pa.Table:
    """Every chargeback against ``days``' transactions that is reported after the last of them."""
    cutoff = pa.scalar(max(days), pa.date32())
    parts = [domain.chargebacks_filed_for(d) for d in days]
    return pa.concat_tables([p.filter(pc.greater(p.column("reported_date"), cutoff)) for p in parts]).sort_by("chargeback_id")


def later_chargebacks(domain: FraudDomain, days: Sequence[dt.date]) -> list[RawBatch]:
    """:func:`later_chargeback_rows` as the network sends them: one batch per reported day, arriving the next morning."""
    table = later_chargeback_rows(domain, days)
    reported = table.column("reported_date")
    out = []
    for day in sorted(set(reported.to_pylist())):
        rows = table.filter(pc.equal(reported, pa.scalar(day, pa.date32())))
        out.append(batch_of(rows, source=CHARGEBACKS.name, day=day, batch_id="daily", recorded_at=arrival_time(day)))
    return out


def label_diff(demo: Demo) -> dict[str, dict[str, Any]]:
    """Land the later chargebacks, rebuild, and print the v5 -> v6 label diff (flips by example id). Returns the publication."""
    demo.ingest(later_chargebacks(demo.domain, demo.days), "later-chargebacks")
    published = demo.publish()
    diff = diff_realizations(demo.platform, published[V5]["ref"], published[V6]["ref"], examples=5)
    doc = diff.to_document()
    rows = later_chargeback_rows(demo.domain, demo.days).num_rows
    print(f"\n-- label diff after {rows} later chargebacks arrived: dsv diff fraud_training_set:v5 fraud_training_set:v6")
    print(f"  label {doc['label_version']['a']} -> {doc['label_version']['b']}; rows added {doc['added']['count']}, removed {doc['removed']['count']}")
    for flips in doc["label_flips"]:
        for way in ("0->1", "1->0"):
            examples = ", ".join(str(k) for k in flips[way]["examples"])
            print(f"  {flips['column']} {way}: {flips[way]['count']} example(s)" + (f", e.g. transaction_id {examples}" if examples else ""))
    moves = doc["split_reassignments"]
    parts = doc["partitions"]
    print(f"  split reassignments: {0 if moves is None else moves['count']}; partitions equal {parts['equal']}, differ {len(parts['differ'])}")
    return published
