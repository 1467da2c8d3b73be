"""Issue 16 "Done when": a compromised source writer poisons a batch, and the trust boundaries catch it.

In a strict home with separate identities, ``mallory`` (a source writer the transactions source does
not declare) lands copies of fraudulent transactions under new ids, so they reach the training set
labelled legitimate. The builder builds from it: the integrity signals flag an unexpected writer and
duplicate clusters with different labels. An operator quarantines the raw batch; impact analysis
lists the realization and the model trained on it; the approver cannot approve it; reads and alias
moves are refused (QUARANTINED, exit 14). A release needs a second identity; afterwards the whole
chain of events is in ``dsv audit`` and ``dsv audit --verify`` passes.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.ingest.batch import RawBatch, batch_of
from dsv_platform.core.publication.states import RealizationState
from dsv_platform.core.trust.trust import Role
from dsv_platform.examples.fraud import CONFIG_DIR, model
from dsv_platform.examples.fraud.events import daily_batch
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.examples.fraud.specs import SOURCES
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.ingest.label_build import build_labels
from dsv_platform.services.publication.realization import RealizationBuild, build_realization
from dsv_platform.services.reproduction.model_run import train_model
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result

POISON_ID_OFFSET = 70_000_000
POISONED_ROWS = 10
RESENT_AT = dt.datetime(2026, 6, 20, 12, tzinfo=dt.UTC)  # after every honest batch: the newest data the build pins
IDENTITIES = ("pos-writer", "mallory", "builder", "approver", "op-two", "auditor", "trainer")


def write_config(folder: Path) -> Path:
    """The fraud configuration; transactions declares its writer, the training set names its label for the integrity signals."""
    shutil.copytree(CONFIG_DIR, folder)
    for source in ("transactions", "chargebacks"):
        with (folder / "sources" / f"{source}.yaml").open("a") as f:
            f.write("writers: [pos-writer]  # the identity expected to land its batches (integrity signal unexpected_writer)\n")
    v6 = folder / "datasets" / "fraud_training_set_v6.yaml"
    text = v6.read_text().replace("rows_at_least: 100", "rows_at_least: 50")
    v6.write_text(text + "integrity: {label_column: is_fraud}\n")
    return folder


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"DSV_HOME": str(tmp_path / "home"), "DSV_CONFIG_DIR": str(write_config(tmp_path / "config"))}


@pytest.fixture
def dsv(home: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvCli:
    """``dsv(*args, identity=...)``: the CLI in process on the strict home, as ``identity`` (DSV_IDENTITY)."""
    return DsvCli(capsys, monkeypatch, home)


def ok(result: Result) -> str:
    assert result.code == 0, result
    return result.out


def refused(result: Result, code: int, *names: str) -> None:
    assert result.code == code, result
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    for name in names:
        assert name in result.err, (name, result.err)


def platform_as(home: dict[str, str], identity: str) -> Platform:
    return build_platform(load_settings({**home, "DSV_IDENTITY": identity}))


def land(home: dict[str, str], identity: str, batches: Iterable[RawBatch]) -> None:
    """Land ``batches`` as ``identity`` (its source_writer grant checked, recorded as each batch's writer), load them, rebuild the labels."""
    with platform_as(home, identity) as p:
        touched = set()
        for batch in batches:
            p.landing.writer = trust.require(p, Role.SOURCE_WRITER, source=batch.source).identity
            touched |= {(batch.source, r.day) for r in p.landing.land_all(batch, p.config.sources[batch.source])}
        for source, day in sorted(touched):
            load_partition(p, p.config.sources[source], day)
        for label in p.config.labels["fraud"].values():
            build_labels(p, label)


def build_as(home: dict[str, str], identity: str) -> RealizationBuild:
    with platform_as(home, identity) as p:
        definition = next(d for d in p.config.datasets if d.ref == "fraud_training_set:v6")
        return build_realization(p, definition)


def poisoned_batches(domain: FraudDomain) -> list[RawBatch]:
    """Copies of real transactions under new ids (same account, amount, day, features) with confirmed chargebacks: labelled fraud."""
    days = domain.days(8)
    rows = domain.transactions(days[2]).slice(0, POISONED_ROWS)
    rows = rows.set_column(0, "transaction_id", pc.add(rows.column("transaction_id"), POISON_ID_OFFSET))
    ids = rows.column("transaction_id")
    n = rows.num_rows
    charged = dt.datetime.combine(days[3], dt.time(12), dt.UTC)
    chargebacks = pa.table(
        {
            "chargeback_id": pa.array([f"cb_resend_{i}" for i in ids.to_pylist()], pa.string()),
            "transaction_id": ids,
            "account_id": rows.column("account_id"),
            "amount": pc.abs(rows.column("amount")),
            "reason_code": pa.array(["fraud_card_absent"] * n, pa.string()),
            "status": pa.array(["confirmed"] * n, pa.string()),
            "charged_back_at": pa.array([charged] * n, pa.timestamp("us", tz="UTC")),
            "reported_date": pa.array([days[4]] * n, pa.date32()),
        }
    )
    return [
        batch_of(rows, source="transactions", day=days[2], batch_id="gateway-resend", recorded_at=RESENT_AT),
        batch_of(chargebacks, source="chargebacks", day=days[4], batch_id="network-resend", recorded_at=RESENT_AT),
    ]


def set_up_identities(dsv) -> None:  # type: ignore[no-untyped-def]
    assert "strict home" in ok(dsv("init", "--strict", "--admin", "boss"))
    for name in IDENTITIES:
        ok(dsv("identity", "create", name, identity="boss"))
    grants = [("pos-writer", "source_writer", "--source", s) for s in SOURCES]
    grants += [("mallory", "source_writer", "--source", s) for s in ("transactions", "chargebacks")]
    grants += [("builder", "builder"), ("builder", "publisher")]
    grants += [("approver", "approver"), ("op-two", "operator"), ("auditor", "auditor"), ("trainer", "consumer")]
    for args in grants:
        ok(dsv("grants", "add", *args, "--reason", "team set-up", identity="boss"))


def test_a_compromised_source_writer_is_caught_quarantined_and_released_by_two(dsv, home: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    set_up_identities(dsv)
    domain = FraudDomain(rows_per_day=60)
    land(home, "pos-writer", [daily_batch(domain, s, d) for d in domain.days(8) for s in SOURCES])
    honest = build_as(home, "builder")
    assert {g.name: g.passed for g in honest.gates if g.name.startswith("integrity:")} == dict.fromkeys(
        [f"integrity:{s}" for s in ("unexpected_writer", "unapproved_snapshot", "contributor_share", "duplicate_clusters")]
        + ["integrity:label_change_concentration", "integrity:exclusion_rules_changed", "integrity:raw_agreement"],
        True,
    )

    land(home, "mallory", poisoned_batches(domain))
    poisoned = build_as(home, "builder")
    flagged = {g.name: g for g in poisoned.gates if g.name.startswith("integrity:") and not g.passed}
    assert set(flagged) == {"integrity:unexpected_writer", "integrity:duplicate_clusters"}, poisoned.gates
    assert "by mallory" in str(flagged["integrity:unexpected_writer"].detail["found"])
    assert flagged["integrity:duplicate_clusters"].detail["clusters"] == POISONED_ROWS
    assert not any(g.blocking for g in flagged.values())  # warn by default: published, for a human to look at

    with platform_as(home, "trainer") as p:
        run = train_model(p, poisoned.ref, model_name="fraud_model", trainer=model.TRAINER, seed=42)

    raw_ref = "raw:transactions/gateway-resend"
    refused(dsv("quarantine", raw_ref, "--reason", "writer not expected", identity="builder"), 7, "'builder'", "'operator'")
    out = ok(dsv("quarantine", raw_ref, "--reason", "unexpected writer mallory; duplicated fraud rows relabelled", identity="boss"))
    assert f"realization:{poisoned.manifest_hash} {poisoned.ref} QUARANTINED" in out and f"model_run:{run.run_hash}" in out
    assert honest.manifest_hash not in out  # built before the batch landed: not a descendant
    assert "integrity signals of" in out and "integrity:unexpected_writer" in out
    impact = json.loads(ok(dsv("lineage", f"raw_batch:gateway-resend@{poison_digest(home)}", "--impact", "--json", identity="auditor")))
    assert {f"realization:{poisoned.manifest_hash}", f"model_run:{run.run_hash}"} <= {n["node"] for n in impact["nodes"]}

    refused(dsv("approve", poisoned.ref, "--reason", "looks fine", identity="approver"), 15, "QUARANTINED")
    refused(dsv("resolve", poisoned.ref, identity="trainer"), 14, "QUARANTINED", poisoned.ref)
    refused(dsv("alias", "set", "fraud_training_set:v6@candidate", poisoned.manifest_hash, "--expect", poisoned.manifest_hash, identity="builder"), 14)
    status = ok(dsv("status", identity="auditor"))
    assert f"QUARANTINED {poisoned.ref}: quarantine #1 of {raw_ref} by boss" in status

    ok(dsv("release", raw_ref, "--reason", "batch deleted at the source; rebuild without it", identity="boss"))
    refused(dsv("release", raw_ref, "--approve", "--reason", "me again", identity="boss"), 7, "'boss'", "second identity")
    released = ok(dsv("release", raw_ref, "--approve", "--reason", "reviewed the evidence", identity="op-two"))
    assert poisoned.ref in released
    with platform_as(home, "auditor") as p:
        assert p.registry.find_by_manifest_hash(poisoned.manifest_hash).state is RealizationState.PUBLISHED  # type: ignore[union-attr]

    trail = [(e["identity"], e["action"], e["target"]) for e in json.loads(ok(dsv("audit", "--json", identity="auditor")))]
    assert [t for t in trail if t[1] in ("publish", "approve", "quarantine", "release", "release.approve")] == [
        ("builder", "publish", honest.ref),
        ("builder", "publish", poisoned.ref),
        ("boss", "quarantine", raw_ref),
        ("boss", "release", raw_ref),
        ("op-two", "release.approve", raw_ref),
    ], trail
    assert "verifies" in ok(dsv("audit", "--verify", identity="auditor"))


def poison_digest(home: dict[str, str]) -> str:
    with platform_as(home, "auditor") as p:
        return next(r.digest for r in p.landing.records("transactions") if r.batch_id == "gateway-resend")
