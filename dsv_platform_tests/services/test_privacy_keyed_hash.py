"""Issue 25 item 4: what a deletion keeps does not give the subject back.

The attack of the issue: take the salt from the home's key store, hash every candidate id
``acct_00000..acct_99999`` and look for the result among what the registry keeps (request hashes,
request ids, redaction generations, the subject index, the audit log). With subject hashes keyed by
a key held apart (``DSV_SUBJECT_KEY_FILE``, outside the home and the registry) nothing matches;
a registry of plain salted hashes is keyed in place at the key's first use, and a missing or other
key is refused. The demos' batch files do not outlive the landing under the home.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlalchemy import create_engine, select

from dsv_platform.adapters.registry import schema as s
from dsv_platform.adapters.registry import schema_trust as st
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.bootstrap import build_encrypted_store
from dsv_platform.core.errors import EnvironmentSetupError
from dsv_platform.examples.readings import CONFIG_DIR as READINGS_CONFIG
from dsv_platform.examples.readings import generator
from dsv_platform.examples.readings.demo import Story
from dsv_platform.services.privacy.privacy import PrivacyCoordinator
from dsv_platform.services.privacy.privacy_key import load_subject_key
from dsv_platform.settings import load_settings
from dsv_platform_tests.services import kill_support as ks
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_privacy import FRAUD_CONFIG, SUBJECT, publish, settings_for

CANDIDATES = [f"acct_{i:05d}" for i in range(100_000)]


def kept_strings(url: str, *, tables: tuple[Any, ...] = (s.privacy_requests, s.redaction_generations, s.subject_index), audit: bool = True) -> set[str]:
    """Every subject hash, request id and audit target or detail the registry keeps about deletions."""
    engine = create_engine(url)
    out: set[str] = set()
    with engine.connect() as conn:
        for table in tables:
            out |= {str(v) for v in conn.execute(select(table.c.subject_key_hash)).scalars()}
        out |= {str(v) for v in conn.execute(select(s.privacy_requests.c.request_id)).scalars()}
        for row in conn.execute(select(st.audit_log)) if audit else ():
            out |= {str(row.target), json.dumps(dict(row._mapping), default=str)}
    engine.dispose()
    return out


def enumerate_subjects(salt: bytes, kept: set[str]) -> tuple[list[str], float]:
    """The candidates whose salted hash (or its 32-character prefix, as in a default request id) is in ``kept``; the seconds it took."""
    tokens = {t[:32] for text in kept for t in re.findall(r"[0-9a-f]{32,}", text)}
    started = time.perf_counter()
    found = []
    for candidate in CANDIDATES:
        h = hashlib.sha256(b"dsv-subject:" + salt + b":" + candidate.encode()).hexdigest()
        if h[:32] in tokens:
            found.append(candidate)
    return found, time.perf_counter() - started


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    base = {**ks.local_env(tmp_path), "DSV_SUBJECT_KEY_FILE": str(tmp_path / "vault" / "subject-key")}
    if request.param == "postgres":
        base["DSV_REGISTRY_URL"] = str(request.getfixturevalue("postgres_url"))
    return base


def test_the_salt_and_the_registry_do_not_recover_a_deleted_subject(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert ks.SUBJECT in CANDIDATES
    ks.seed_world(env)
    assert ks.rerun(monkeypatch, env, "privacy", "delete", "--subject", ks.SUBJECT, "--reason", "GDPR art. 17 request #4") == 0
    with ks.platform(env) as p:
        salt, url, home, settings = p.store.keys.salt(), p.settings.registry_url, p.home, p.settings
        status = p.registry.privacy.requests()
    assert len(status) == 1 and status[0].completed
    kept = kept_strings(url)
    assert status[0].subject_key_hash in kept  # the control: the subject's hash is what is kept

    found, seconds = enumerate_subjects(salt, kept)
    print(f"enumerated {len(CANDIDATES)} candidates in {seconds:.2f} s")
    assert found == [], f"recovered {len(found)} subjects ({found[:3]}...) from the salt and the registry"
    key_path = settings.subject_key_path
    assert home not in key_path.parents and key_path.stat().st_mode & 0o077 == 0  # held apart, owner-only


def test_a_salted_registry_is_keyed_in_place_and_a_wrong_key_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    settings = settings_for(tmp_path, url)
    store = build_encrypted_store(settings)
    key = load_subject_key(tmp_path / "vault" / "subject-key")
    with Registry.from_url(url) as reg:
        pw.register(reg)
        publish(reg, store, "r-before")
        legacy = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG)  # no key: plain salted hashes (an old home)
        salted = legacy.delete(SUBJECT, "GDPR art. 17 request #4b").subject_key_hash
        assert SUBJECT in enumerate_subjects(store.keys.salt(), kept_strings(url))[0]  # what main keeps: recoverable

        keyed = PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG, subject_key=key)
        status = keyed.status(SUBJECT)
        assert status["deleted"] and status["subject_key_hash"] != salted
        assert salted not in kept_strings(url, tables=(s.privacy_requests, s.subject_index), audit=False)  # keyed in place
        assert salted in kept_strings(url)  # append-only redaction_generations keep it: docs/gc-and-privacy.md says so
        rows = pa.table({"account_id": [SUBJECT, "acct_99999"], "amount": [1, 2]})
        assert pc.equal(keyed.exclusion_filter(["account_id"])(rows).column("account_id"), "acct_99999").to_pylist() == [True]

        for other in (None, b"\x01" * 32):  # fail closed: a keyed registry without its key, or with another one
            with pytest.raises(EnvironmentSetupError, match="DSV_SUBJECT_KEY_FILE"):
                PrivacyCoordinator(reg, store, actor="privacy-officer", config=FRAUD_CONFIG, subject_key=other).status(SUBJECT)


def test_the_readings_demo_leaves_no_batch_file_under_the_home(tmp_path: Path) -> None:
    from dsv_platform.bootstrap import build_platform

    settings = load_settings({"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(READINGS_CONFIG)})
    with build_platform(settings) as platform:
        story = Story(platform, runner=None)  # type: ignore[arg-type]  # landing needs no runner
        story.land([generator.late_batch()], "late-readings")
        assert platform.landing.records()  # landed (sealed in the raw zone)
        left = [str(p) for p in story.folder.rglob("*") if p.is_file()]
    assert left == [], left
