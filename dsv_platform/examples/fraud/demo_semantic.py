"""Two semantic failure modes of the fraud sources, blocked by the v6 contract's expectations.

- ``cents_batches``: the payments source starts sending amounts in cents (x100) as
  corrections of already sent days; the ``typical`` band of ``amount`` blocks publication.
- ``leaked_test_accounts``: transactions of internal test accounts (``test_*``) leak into the
  feed; the ``population`` rule on ``account_id`` blocks publication.

:func:`play` shows both in ``dsv demo`` on a scratch home (the demo's own home stays clean).
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.errors import PublicationError
from dsv_platform.core.ingest.batch import RawBatch, arrival_time, batch_of
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.ingest.label_build import build_labels
from dsv_platform.services.publication.realization import ALIAS, build_realization
from dsv_platform.services.publication.semantic_gate import stored_semantic_gates

TEST_ID_OFFSET = 7_000_000
SCRATCH = "semantic-demo"


def cents_batches(domain: FraudDomain, days: Sequence[dt.date], *, recorded_on: dt.date) -> list[RawBatch]:
    """Each day's transactions again, amounts multiplied by 100, recorded on ``recorded_on`` (they supersede the originals)."""
    out = []
    for day in days:
        table = domain.transactions(day)
        amount = pc.multiply(table.column("amount"), pa.scalar(100, pa.decimal128(5, 0))).cast(pa.decimal128(18, 2))
        table = table.set_column(table.column_names.index("amount"), "amount", amount)
        out.append(batch_of(table, source=TRANSACTIONS.name, day=day, batch_id=f"cents-{recorded_on}", recorded_at=arrival_time(recorded_on, hour=5)))
    return out


def restore_batches(domain: FraudDomain, days: Sequence[dt.date], *, recorded_on: dt.date) -> list[RawBatch]:
    """The source's fix: each day's transactions in dollars again, recorded on ``recorded_on``."""
    return [
        batch_of(domain.transactions(day), source=TRANSACTIONS.name, day=day, batch_id=f"fix-{recorded_on}", recorded_at=arrival_time(recorded_on, hour=6))
        for day in days
    ]


def leaked_test_accounts(domain: FraudDomain, day: dt.date, *, arrived: dt.date, count: int = 5) -> RawBatch:
    """``count`` transactions of ``day`` re-sent under internal test accounts (new ids), arriving on ``arrived``."""
    table = domain.transactions(day).slice(0, count)
    ids = pc.add(table.column("transaction_id"), TEST_ID_OFFSET)
    table = table.set_column(0, "transaction_id", ids)
    table = table.set_column(1, "account_id", pa.array([f"test_{i:05d}" for i in range(count)], pa.string()))
    return batch_of(table, source=TRANSACTIONS.name, day=day, batch_id="test-accounts", recorded_at=arrival_time(arrived, hour=3))


def _ingest(platform: Platform, batches: Sequence[RawBatch]) -> None:
    touched = {(b.source, record.day) for b in batches for record in platform.landing.land_all(b, platform.config.sources[b.source])}
    for source, day in sorted(touched):
        load_partition(platform, platform.config.sources[source], day)
    for label in platform.config.labels["fraud"].values():
        build_labels(platform, label)


def _attempt(platform: Platform, title: str) -> bool:
    """Build fraud_training_set:v6 and print the outcome; True when it was blocked by a semantic rule."""
    definition = platform.config.dataset("fraud_training_set", "v6")
    try:
        build = build_realization(platform, definition)
    except PublicationError:
        failed = platform.registry.versions(definition.name, include_candidates=True)[0]
        assert failed.manifest_hash is not None
        gates = [g for g in stored_semantic_gates(platform, failed.manifest_hash) if g.blocking and not g.passed]
        for g in gates:
            print(f"  {title}: BLOCKED ({failed.state.value}) by {g.name}: observed {g.detail['observed']}, bound {g.detail['bound']}")
        alias = platform.registry.get_alias(definition.name, definition.version, ALIAS)
        print(f"      alias {ALIAS} still -> {alias.target[:16] if alias else None}")
        return bool(gates)
    rules = [g for g in build.gates if g.name.startswith("semantic:")]
    print(f"  {title}: published {build.ref} ({sum(g.passed for g in rules)}/{len(rules)} semantic gates passed)")
    return False


def play(demo_platform: Platform, *, rows_per_day: int = 40, days: int = 5) -> int:
    """Both failure modes on a scratch embedded platform in ``<demo home>/semantic-demo`` (recreated each time); returns the surprises."""
    home = demo_platform.settings.home / SCRATCH
    shutil.rmtree(home, ignore_errors=True)
    domain = FraudDomain(rows_per_day=rows_per_day)
    dates = domain.days(days)
    print(f"\n== semantic expectations (docs/contracts.md), on a scratch home {home}")
    with build_platform(demo_platform.settings.with_home(home)) as platform:
        _ingest(platform, [daily_batch(domain, s, d) for d in dates for s in ("transactions", "chargebacks", "account_features")])
        surprises = int(_attempt(platform, "good data"))
        _ingest(platform, cents_batches(domain, dates, recorded_on=dates[-1]))
        surprises += not _attempt(platform, "amounts re-sent in cents")
        _ingest(platform, restore_batches(domain, dates, recorded_on=dates[-1]))
        surprises += int(_attempt(platform, "source fixed (dollars again)"))
        _ingest(platform, [leaked_test_accounts(domain, dates[2], arrived=dates[-1], count=5)])
        surprises += not _attempt(platform, "test accounts leaked")
    return surprises
