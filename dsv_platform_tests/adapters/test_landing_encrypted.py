"""Raw landing through the encrypting store (issue 11 item 4) and sealed staging (item 3).

Batches land sealed under their own key (no plaintext on disk), a crypto-erased
batch stays erased when the same bytes land again, batches landed in the clear
before still read, and staged parts are sealed under the key of their
plaintext digest (parts staged in the clear before still read and promote).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.encrypted_store import STAGED_MAGIC, EncryptingObjectStore
from dsv_platform.adapters.objects.landing import LandingStatus
from dsv_platform.bootstrap import build_encrypted_store, build_landing, build_object_store
from dsv_platform.core.errors import ObjectErasedError
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import TRANSACTIONS
from dsv_platform_tests.defs.support import settings_at

DOMAIN = FraudDomain(rows_per_day=50)
DAY = DOMAIN.start + dt.timedelta(days=1)


def holding(root: Path, needle: bytes) -> list[Path]:
    return [Path(d, n) for d, _, names in os.walk(root) for n in names if needle in Path(d, n).read_bytes()]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def encrypted(home: Path) -> EncryptingObjectStore:
    return build_encrypted_store(settings_at(home))


def test_a_batch_lands_sealed_and_is_crypto_erasable(home: Path) -> None:
    store = encrypted(home)
    zone = build_landing(settings_at(home), store)
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    record = zone.land(batch, TRANSACTIONS)
    assert zone.read(record) == batch.data and store.is_encrypted(record.digest)
    assert not store.inner.exists(record.digest)
    line = batch.data.splitlines()[1]
    assert not holding(home, line), "no plaintext row of the batch on disk"

    assert store.erase(record.digest) is not None
    zone.mark_redacted(record.digest, 1, "test")
    with pytest.raises(ObjectErasedError):
        zone.read(record)
    again = zone.land(batch, TRANSACTIONS)  # the same bytes again: nothing is written, the record says redacted
    assert again.redacted and not again.loadable and not store.exists(record.digest)


def test_a_batch_landed_in_the_clear_before_still_reads(home: Path) -> None:
    plain = build_landing(settings_at(home), build_object_store(settings_at(home)))
    batch = events.daily_batch(DOMAIN, "transactions", DAY)
    record = plain.land(batch, TRANSACTIONS)
    zone = build_landing(settings_at(home), encrypted(home))
    assert zone.read(record) == batch.data
    assert zone.land(batch, TRANSACTIONS).status is LandingStatus.UNCHANGED


def test_staged_parts_are_sealed_and_erasable(home: Path) -> None:
    store = encrypted(home)
    data = b"account acct_00042 " * 100
    digest = store.stage("attempt-1", "part-0.bin", data)
    assert digest == hashlib.sha256(data).hexdigest() == store.staged_digest("attempt-1", "part-0.bin")
    raw = store.inner.get_staged("attempt-1", "part-0.bin")
    assert raw.startswith(STAGED_MAGIC) and b"acct_00042" not in raw
    assert store.get_staged("attempt-1", "part-0.bin") == data
    assert store.promote("attempt-1", "part-0.bin") == digest and store.get(digest) == data

    other = b"never promoted acct_00043"
    staged_only = store.stage("attempt-2", "part-0.bin", other)
    assert store.erase(staged_only) is None  # no ciphertext object; the key is destroyed all the same
    with pytest.raises(ObjectErasedError):
        store.get_staged("attempt-2", "part-0.bin")
    assert not holding(home, b"acct_0004")


def test_a_part_staged_in_the_clear_before_still_promotes(home: Path) -> None:
    store = encrypted(home)
    store.inner.stage("old-attempt", "part.bin", b"legacy plaintext part")
    assert store.staged_digest("old-attempt", "part.bin") is None
    digest = store.promote("old-attempt", "part.bin")
    assert store.get(digest) == b"legacy plaintext part" and store.is_encrypted(digest)
