"""Regression (issue 28, item 2): a quarantined realization fails with its own kind, QUARANTINED, not ACCESS_DENIED.

Through the in-process ``dsv`` (the operator's ``dsv quarantine`` on the embedded home): ``dsv resolve``
and an alias move exit with QUARANTINED's code from the failure table (14) naming the kind, ``--json``
says ``"error": "QUARANTINED"``; ``open_dataset`` raises a QuarantinedError that is not an access denial,
and the consumption record keeps the kind QUARANTINED. After the two-person release it resolves again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.core.errors import AccessDeniedError, FailureKind, QuarantinedError
from dsv_platform.core.publication.failures import exit_code
from dsv_platform.services.publication.datasets import open_dataset
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli
from dsv_platform_tests.services import publisher_worker as pw

QUARANTINED_EXIT = 14  # the documented code (README, "Errors and exit codes"): kept as it was


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def dsv(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path) -> DsvCli:
    return DsvCli(capsys, monkeypatch, {"DSV_HOME": str(home)})


def test_a_quarantined_realization_fails_with_its_own_kind(dsv: DsvCli, home: Path) -> None:
    settings = load_settings({"DSV_HOME": str(home)})
    with build_platform(settings) as platform:
        pw.register(platform.registry)
        built = pw.build(platform.registry, platform.store, "r-quarantined", alias="candidate")
    ref, mh = built.realization.ref, built.manifest.manifest_hash
    assert dsv("resolve", ref).code == 0

    quarantined = dsv("quarantine", ref, "--reason", "label flips reported by the fraud team")
    assert quarantined.code == 0, quarantined

    text = dsv("resolve", ref)
    assert text.code == QUARANTINED_EXIT == exit_code(FailureKind.QUARANTINED), text
    assert text.err.startswith("dsv: error: QUARANTINED: ") and text.err.count("\n") == 1 and ref in text.err, text.err
    assert "ACCESS_DENIED" not in text.err

    as_json = dsv("resolve", ref, "--json")
    doc = json.loads(as_json.out)
    assert as_json.code == QUARANTINED_EXIT and (doc["error"], doc["exit_code"], doc["ref"]) == ("QUARANTINED", QUARANTINED_EXIT, ref)
    assert doc["detail"]["state"] == "QUARANTINED"

    moved = dsv("alias", "set", f"{pw.NAME}:{pw.VERSION}@candidate", mh, "--expect", mh)
    assert moved.code == QUARANTINED_EXIT and "QUARANTINED" in moved.err and "quarantine #1" in moved.err, moved

    with build_platform(settings) as platform:
        with pytest.raises(QuarantinedError) as info:
            open_dataset(platform, ref)
        assert info.value.kind is FailureKind.QUARANTINED and info.value.exit_code == QUARANTINED_EXIT
        assert not isinstance(info.value, AccessDeniedError)
        assert platform.registry.consumption_summary()[""]["failed"] == {"QUARANTINED": 1}  # the read audit names the kind

    dsv("identity", "create", "reviewer")
    dsv("grants", "add", "reviewer", "approver", "--reason", "second pair of eyes")
    assert dsv("release", ref, "--reason", "the flips were a reporting error").code == 0
    assert dsv("release", ref, "--approve", "--reason", "evidence reviewed", identity="reviewer").code == 0
    assert mh in dsv("resolve", ref).out
