"""A process of the shared-state test (test_shared_state_processes.py): lands batches, or reads every landed batch.

Run as ``python -m dsv_platform_tests.adapters.shared_state_worker land|read INDEX GO_FILE``, configured by ``DSV_*``
variables like any platform process (its own ``DSV_HOME``); prints its outcome as one JSON document.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

from dsv_platform.bootstrap import build_landing
from dsv_platform.core.errors import ObjectErasedError
from dsv_platform.core.ingest.batch import RawBatch
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform.settings import load_settings

DOMAIN = FraudDomain(rows_per_day=30)
DAYS = [DOMAIN.start + dt.timedelta(days=n) for n in range(6)]
CONTESTED = DOMAIN.start + dt.timedelta(days=10)


def shared_batches() -> list[RawBatch]:
    """The batches both processes land, the same bytes: each must end as one record."""
    return [events.daily_batch(DOMAIN, "transactions", day) for day in DAYS]


def contested_batch(index: int) -> RawBatch:
    """One batch id both processes land at once with different bytes: one LANDED, the other REVISED."""
    batch = events.daily_batch(DOMAIN, "transactions", CONTESTED)
    lines = batch.data.splitlines(keepends=True)
    data = b"".join(lines[: len(lines) - 1 - index])
    return RawBatch(batch.source, batch.day, "contested", batch.recorded_at, data, batch.format)


def land(index: int, go: Path) -> list[dict[str, object]]:
    zone = build_landing(load_settings())
    batches = shared_batches()
    if index:
        batches.reverse()  # the two processes meet in the middle, and at both ends
    while not go.exists():  # both processes opened everything: start together
        time.sleep(0.01)
    out = []
    for batch in [contested_batch(index), *batches]:
        record = zone.land(batch, TRANSACTIONS)
        out.append({"day": record.day.isoformat(), "batch_id": record.batch_id, "digest": record.digest, "status": record.status.value, "seq": record.seq})
    return out


def read() -> dict[str, str]:
    zone = build_landing(load_settings())
    seen = {}
    for record in zone.records():
        try:
            zone.read(record)  # re-hashed against the digest: the key this process found decrypts it
            seen[record.digest] = "redacted" if record.redacted else "ok"
        except ObjectErasedError:
            seen[record.digest] = "erased" + (" redacted" if record.redacted else "")
    return seen


def main(argv: list[str]) -> int:
    """``land INDEX GO`` or ``read INDEX GO``: prints the report as one JSON line."""
    mode, index, go = argv[0], int(argv[1]), Path(argv[2])
    print(json.dumps(land(index, go) if mode == "land" else read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
